// Package controllers wires the reference operator's components into a manager. Each component
// is a package with one kdag ResourceManager; adding one is a line in Components.
package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/kdag-dev/kdag/controllers/gitea"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// Component is one reconciled kind: the controller's name and its ResourceManager.
type Component struct {
	Name string
	RM   controller.ResourceManager
}

// Components lists the reference operator's controllers.
func Components() []Component {
	return []Component{
		{Name: "gitea", RM: gitea.ResourceManager{}},
		{Name: "postgresql", RM: postgresql.ResourceManager{}},
		{Name: "valkey", RM: valkey.ResourceManager{}},
		{Name: "giteaserver", RM: giteaserver.ResourceManager{}},
	}
}

// CacheOptions keeps built-in objects in the manager's cache only when a kdag controller applied
// them. The child custom resources are owners too, so their controllers see them all.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: controller.CacheByObject(
		&corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{},
		&appsv1.Deployment{}, &appsv1.StatefulSet{}, &batchv1.Job{}, &networkingv1.Ingress{},
	)}
}

// Setup registers every component's Controller with mgr. opts apply to all; concurrency maps a
// controller name to its MaxConcurrentReconciles (missing or 0: the controller's default).
func Setup(mgr ctrl.Manager, concurrency map[string]int, opts ...controller.Option) error {
	for _, c := range Components() {
		o := opts
		if n := concurrency[c.Name]; n > 0 {
			o = append(append([]controller.Option(nil), opts...), controller.WithMaxConcurrentReconciles(n))
		}
		if _, err := controller.New(mgr, c.Name, c.RM, o...); err != nil {
			return err
		}
	}
	return nil
}
