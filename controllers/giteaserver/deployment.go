package giteaserver

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// deployment runs the Gitea server on the data claim. With one replica on a ReadWriteOnce
// claim the old pod must stop before the new one mounts it: Recreate.
func deployment(s *giteav1alpha1.GiteaServer) *appsv1.Deployment {
	strategy := appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	if s.Spec.Storage.AccessMode == corev1.ReadWriteMany {
		strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}
	}
	server := corev1.Container{
		Name:  "gitea",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/api/healthz", Port: intstr.FromString("http")}},
			PeriodSeconds: 10,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
			InitialDelaySeconds: 30,
			PeriodSeconds:       10,
		},
	}
	claim := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: dataClaimName(s.Name)}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: common.WithVersion(labels(s), s.Spec.Version)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(s.Spec.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels(s)},
			Strategy: strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: podMeta(s, "server"),
				Spec:       podSpec(s, claim, server),
			},
		},
	}
}
