package valkey

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// valkeyUID is the valkey user of the official image.
const valkeyUID = 999

// deployment runs one Valkey server. kdag puts the ConfigMap's content hash on the pod
// template, so editing spec.config rolls the pod.
func deployment(v *giteav1alpha1.Valkey) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: v.Name, Labels: common.WithVersion(labels(v), v.Spec.Version)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels(v)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(v)},
				Spec: corev1.PodSpec{
					SecurityContext: common.PodSecurity(valkeyUID),
					Containers: []corev1.Container{{
						Name:      "valkey",
						Image:     common.Image(v.Spec.Image, v.Spec.Version),
						Args:      []string{"valkey-server", "/etc/valkey/valkey.conf"},
						Ports:     []corev1.ContainerPort{{Name: "valkey", ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
						Resources: v.Spec.Resources,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("valkey")}},
							PeriodSeconds: 5,
						},
						SecurityContext: common.ContainerSecurity(),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/valkey", ReadOnly: true},
							{Name: "data", MountPath: "/data"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: v.Name + "-config"},
						}}},
						common.EmptyDir("data"),
					},
				},
			},
		},
	}
}
