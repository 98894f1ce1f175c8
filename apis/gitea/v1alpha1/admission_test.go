package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

// TestAdmission_RefusesWhatCannotBeApplied: a spec the operator could never apply, or that would
// break the app, is refused by the API server with a message saying what to do (issue 20,
// items 8, 9 and 11); the same spec fixed is accepted.
func TestAdmission_RefusesWhatCannotBeApplied(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	gitea := func(name string, mutate func(*v1alpha1.Gitea)) *v1alpha1.Gitea {
		g := &v1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		mutate(g)
		return g
	}
	for _, tc := range []struct {
		name string
		obj  *v1alpha1.Gitea
		want string
	}{
		{"external database Secret named like the generated one", gitea("a", func(g *v1alpha1.Gitea) {
			g.Spec.Database = v1alpha1.DatabaseSpec{Type: v1alpha1.DatabaseExternal,
				External: &v1alpha1.ExternalDatabaseSpec{SecretRef: v1alpha1.SecretReference{Name: "a-secrets"}}}
		}), "must not name <name>-secrets"},
		{"admin Secret named like the managed database's", gitea("b", func(g *v1alpha1.Gitea) {
			g.Spec.Admin = &v1alpha1.AdminSpec{SecretRef: v1alpha1.SecretReference{Name: "b-postgresql-credentials"}}
		}), "must not name <name>-postgresql-credentials"},
		{"TLS Secret named like the generated one", gitea("c", func(g *v1alpha1.Gitea) {
			g.Spec.Ingress = &v1alpha1.IngressSpec{Host: "git.example.com", TLSSecretName: "c-secrets"}
		}), "must not name <name>-secrets"},
		{"memory limit below the request", gitea("d", func(g *v1alpha1.Gitea) {
			g.Spec.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			}
		}), "limits must not be below resources.requests"},
		{"database cpu limit below the request", gitea("e", func(g *v1alpha1.Gitea) {
			g.Spec.Database.Managed = &v1alpha1.ManagedDatabaseSpec{Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			}}
		}), "limits must not be below resources.requests"},
		{"an extraEnv value too large", gitea("f", func(g *v1alpha1.Gitea) {
			g.Spec.ExtraEnv = []corev1.EnvVar{{Name: "BIG", Value: strings.Repeat("x", 4097)}}
		}), "extraEnv values must be at most 4096 characters"},
		{"a pod annotation too large", gitea("g", func(g *v1alpha1.Gitea) {
			g.Spec.PodAnnotations = map[string]string{"big": strings.Repeat("x", 4097)}
		}), "podAnnotations values must be at most 4096 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalid(t, env.Client.Create(ctx, tc.obj, strict), tc.want)
		})
	}

	// Sharing one Secret between the database and the administrator is fine.
	shared := gitea("shared", func(g *v1alpha1.Gitea) {
		g.Spec.Database = v1alpha1.DatabaseSpec{Type: v1alpha1.DatabaseExternal,
			External: &v1alpha1.ExternalDatabaseSpec{SecretRef: v1alpha1.SecretReference{Name: "all-in-one"}}}
		g.Spec.Admin = &v1alpha1.AdminSpec{SecretRef: v1alpha1.SecretReference{Name: "all-in-one"}}
		g.Spec.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}
	})
	if err := env.Client.Create(ctx, shared, strict); err != nil {
		t.Fatalf("create with a shared Secret and limits above requests: %v", err)
	}

	// The data claim's access mode is fixed once the Gitea exists.
	changed := shared.DeepCopy()
	changed.Spec.Storage.AccessMode = corev1.ReadWriteMany
	wantInvalid(t, env.Client.Update(ctx, changed, strict), "storage.accessMode is immutable")
}

// TestValkey_ConfigCannotInjectDirectives: reserved directives are refused in any case, and a
// value must be one line (issue 20, item 8).
func TestValkey_ConfigCannotInjectDirectives(t *testing.T) {
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name   string
		config map[string]v1alpha1.ValkeyConfigValue
		want   string
	}{
		{"reserved key in upper case", map[string]v1alpha1.ValkeyConfigValue{"BIND": "127.0.0.1"}, "config must not set port, bind"},
		{"newline in a value", map[string]v1alpha1.ValkeyConfigValue{"maxmemory": "64mb\nrequirepass x"}, "should match"},
		{"key that is not a directive name", map[string]v1alpha1.ValkeyConfigValue{"requirepass x": "y"}, "config keys must be directive names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vk := &v1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"}, Spec: v1alpha1.ValkeySpec{Config: tc.config}}
			wantInvalid(t, env.Client.Create(context.Background(), vk, strict), tc.want)
		})
	}
}
