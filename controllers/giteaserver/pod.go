package giteaserver

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// giteaUID is the git user of the rootless Gitea image.
const giteaUID = 1000

// image is the rootless variant of the official image: it runs as a non-root user.
func image(s *giteav1alpha1.GiteaServer) string {
	return common.Image(s.Spec.Image, s.Spec.Version+"-rootless")
}

// env is the environment every Gitea container gets: database connection details from the
// database Secret (the database component's output), Gitea's keys from the generated Secret,
// then the user's extra variables. Kubernetes expands $(VAR) from earlier entries.
func env(s *giteav1alpha1.GiteaServer) []corev1.EnvVar {
	db := s.Spec.Database.SecretRef.Name
	vars := []corev1.EnvVar{
		common.SecretEnv("DB_HOST", db, giteav1alpha1.DatabaseSecretHostKey),
		common.SecretEnv("DB_PORT", db, giteav1alpha1.DatabaseSecretPortKey),
		common.SecretEnv("DB_NAME", db, giteav1alpha1.DatabaseSecretDatabaseKey),
		common.SecretEnv("GITEA__database__USER", db, giteav1alpha1.DatabaseSecretUserKey),
		common.SecretEnv("GITEA__database__PASSWD", db, giteav1alpha1.DatabaseSecretPasswordKey),
		{Name: "GITEA__database__HOST", Value: "$(DB_HOST):$(DB_PORT)"},
		{Name: "GITEA__database__NAME", Value: "$(DB_NAME)"},
		common.SecretEnv("GITEA__security__SECRET_KEY", generatedSecretName(s.Name), secretKeyKey),
		common.SecretEnv("GITEA__security__INTERNAL_TOKEN", generatedSecretName(s.Name), internalTokenKey),
		{Name: "GITEA_APP_INI", Value: "/etc/gitea/app.ini"},
		{Name: "GITEA_WORK_DIR", Value: "/var/lib/gitea"},
		{Name: "HOME", Value: "/var/lib/gitea/home"},
	}
	return withOverrides(vars, s.Spec.ExtraEnv)
}

// withOverrides returns vars with extra applied as the API documents it: a variable of extra
// replaces the one of the same name in place (later variables that expand $(NAME) see the
// user's value), the others follow in their order. A container's env is a list keyed by name:
// two entries of one name are refused by the API server.
func withOverrides(vars, extra []corev1.EnvVar) []corev1.EnvVar {
	out := slices.Clone(vars)
	for _, e := range extra {
		if i := slices.IndexFunc(out, func(v corev1.EnvVar) bool { return v.Name == e.Name }); i >= 0 {
			out[i] = e
		} else {
			out = append(out, e)
		}
	}
	return out
}

// podSpec is the pod of the server and of its Jobs: an init container copies app.ini from the
// ConfigMap into a writable emptyDir (Gitea's entrypoint merges the GITEA__ variables into it),
// the root filesystem is read-only, and data lives on volume data.
func podSpec(s *giteav1alpha1.GiteaServer, data corev1.VolumeSource, main corev1.Container) corev1.PodSpec {
	mounts := []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/gitea"},
		{Name: "data", MountPath: "/var/lib/gitea"},
		{Name: "tmp", MountPath: "/tmp"},
	}
	main.Image = image(s)
	main.Env = env(s)
	main.VolumeMounts = mounts
	main.SecurityContext = common.ContainerSecurity()
	main.Resources = s.Spec.Resources
	return corev1.PodSpec{
		SecurityContext: common.PodSecurity(giteaUID),
		NodeSelector:    s.Spec.NodeSelector,
		Tolerations:     s.Spec.Tolerations,
		InitContainers: []corev1.Container{{
			Name:            "app-ini",
			Image:           image(s),
			Command:         []string{"cp", "/config-template/app.ini", "/etc/gitea/app.ini"},
			SecurityContext: common.ContainerSecurity(),
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/gitea"},
				{Name: "config-template", MountPath: "/config-template", ReadOnly: true},
			},
		}},
		Containers: []corev1.Container{main},
		Volumes: []corev1.Volume{
			common.EmptyDir("config"),
			{Name: "config-template", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(s.Name)},
			}}},
			{Name: "data", VolumeSource: data},
			common.EmptyDir("tmp"),
		},
	}
}

// podMeta is the pod template metadata: selector labels plus the user's annotations.
func podMeta(s *giteav1alpha1.GiteaServer, component string) metav1.ObjectMeta {
	l := labels(s)
	l["app.kubernetes.io/component"] = component
	return metav1.ObjectMeta{Labels: l, Annotations: s.Spec.PodAnnotations}
}
