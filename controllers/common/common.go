// Package common holds what the reference operator's components share: standard labels, the
// pod security settings, secret generation and image references.
package common

import (
	"crypto/rand"
	"encoding/base64"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// PartOf is the app.kubernetes.io/part-of value of every object of the reference operator.
const PartOf = "gitea"

// Labels returns the standard app.kubernetes.io labels of a component's objects. They are also
// the selector labels, so they must not change over an object's life: no version here.
func Labels(name, instance, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      name,
		"app.kubernetes.io/instance":  instance,
		"app.kubernetes.io/component": component,
		"app.kubernetes.io/part-of":   PartOf,
	}
}

// WithVersion returns labels plus app.kubernetes.io/version, for metadata (not selectors).
func WithVersion(labels map[string]string, version string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out["app.kubernetes.io/version"] = version
	return out
}

// Image returns repository:tag.
func Image(repository, tag string) string { return repository + ":" + tag }

// PodSecurity returns the pod security context of every component: non-root with the given user
// and group, the runtime's default seccomp profile.
func PodSecurity(uid int64) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true),
		RunAsUser:    ptr.To(uid),
		RunAsGroup:   ptr.To(uid),
		FSGroup:      ptr.To(uid),
		SeccompProfile: &corev1.SeccompProfile{
			Type: corev1.SeccompProfileTypeRuntimeDefault,
		},
	}
}

// ContainerSecurity returns the container security context: no privilege escalation, no
// capabilities, a read-only root filesystem (writable paths are emptyDir or claim volumes).
func ContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// RandomSecret returns n random bytes, URL-safe base64 encoded, for generated passwords and
// keys. It is called on every reconcile; the values reach the cluster once, through create-only
// nodes, and are never logged.
func RandomSecret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// EmptyDir returns a volume backed by an emptyDir, for the writable paths of read-only pods.
func EmptyDir(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
}

// SecretEnv returns an environment variable read from key of the Secret named secret.
func SecretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}
