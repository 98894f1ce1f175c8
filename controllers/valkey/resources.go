// Package valkey is the cache component of the reference operator: a kdag ResourceManager that
// runs one Valkey server per Valkey object.
package valkey

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/pkg/errors"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=valkeys,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=valkeys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gitea.kdag.dev,resources=valkeys/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// ResourceManager reconciles Valkey objects.
type ResourceManager struct{}

// OwnedTypes implements controller.OwnedTypes.
func (ResourceManager) OwnedTypes() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &appsv1.Deployment{}}
}

// reserved are the valkey.conf directives the operator owns. Valkey reads directive names
// without case.
var reserved = []string{"port", "bind", "dir", "daemonize", "save", "appendonly"}

// Validate implements controller.Validator. The CRD refuses the same at admission; this check
// keeps an object admitted by an older schema from injecting directives: a reserved key in any
// case, or a value with a line break, which valkey.conf would read as a directive of its own.
func (ResourceManager) Validate(_ context.Context, v *giteav1alpha1.Valkey) error {
	for _, k := range slices.Sorted(maps.Keys(v.Spec.Config)) {
		if slices.Contains(reserved, strings.ToLower(k)) {
			return reconcile.TerminalError(errors.Errorf("spec.config[%q]: the operator owns %s: remove it", k, strings.Join(reserved, ", ")))
		}
		if strings.ContainsAny(k, " \t\r\n") || strings.ContainsAny(string(v.Spec.Config[k]), "\r\n") {
			return reconcile.TerminalError(errors.Errorf("spec.config[%q]: keys and values must be one line without spaces in keys: "+
				"a line break starts a directive of its own", k))
		}
	}
	return nil
}

// AddResources implements controller.ResourceManager: the configuration, the Deployment that
// reads it (a configuration change rolls its pods: the Builder infers the edge from the
// Deployment's volume), and the Service in front of it.
func (ResourceManager) AddResources(_ context.Context, v *giteav1alpha1.Valkey, b *controller.Graph) error {
	b.Add(configMap(v))
	b.Add(deployment(v))
	b.Add(service(v))
	return nil
}
