package controllers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
	os.Exit(envtest.Main(m, &env, envtest.Options{CRDDirectoryPaths: []string{filepath.Join("..", "config", "crd", "bases")}, Scheme: scheme}))
}

// TestRole_GrantsWhatTheOperatorNeeds: the ClusterRole that controller-gen writes from the RBAC
// markers (config/rbac/role.yaml, which the chart and install.yaml ship) grants every rule
// controller.Setup's check asks for: the operator, running as a user bound to that role only,
// is set up and starts. (A missing rule makes Setup fail with the rule named: pkg/controller's
// TestSetup_RBACCheck.)
func TestRole_GrantsWhatTheOperatorNeeds(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	const user = "kdag-operator"
	role.Name = "kdag-operator-under-test"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := env.User(user)
	if err != nil {
		t.Fatal(err)
	}

	components := controllers.Components(nil)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      controller.CacheOptions(env.Scheme, components...),
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controller.Setup(t.Context(), mgr, components); err != nil {
		t.Fatalf("the operator, with config/rbac/role.yaml only: %v", err)
	}
	// The check runs as the manager starts; a start that outlives this window passed it (it
	// takes one SelfSubjectAccessReview per rule, a few milliseconds each).
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("the operator, with config/rbac/role.yaml only, does not start: %v", err)
	}
}
