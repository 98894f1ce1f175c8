package postgresql

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

// headlessService gives the StatefulSet's pod a stable DNS name.
func headlessService(pg *giteav1alpha1.PostgreSQL) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(pg.Name), Labels: labels(pg)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels(pg),
			Ports: []corev1.ServicePort{{
				Name: "postgresql", Port: Port, TargetPort: intstr.FromString("postgresql"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}
