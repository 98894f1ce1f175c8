package valkey

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

func service(v *giteav1alpha1.Valkey) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(v.Name), Labels: labels(v)},
		Spec: corev1.ServiceSpec{
			Selector: labels(v),
			Ports: []corev1.ServicePort{{
				Name: "valkey", Port: Port, TargetPort: intstr.FromString("valkey"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}
