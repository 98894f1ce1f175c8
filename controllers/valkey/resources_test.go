package valkey

import (
	"errors"
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/internal/operatortest"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// scheme holds client-go's types and the reference operator's API.
var scheme = operatortest.Scheme()

// defaulted returns the Valkey a Gitea demo creates, as the API server defaults it from the
// CRD (controllertest.Defaulted), changed by mods.
func defaulted(mods ...func(*giteav1alpha1.Valkey)) *giteav1alpha1.Valkey {
	v := &giteav1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-valkey", UID: "00000000-0000-0000-0000-000000000004"}}
	utilruntime.Must(api.Default(v))
	for _, mod := range mods {
		mod(v)
	}
	return v
}

func configured(v *giteav1alpha1.Valkey) {
	v.Spec.Config = map[string]giteav1alpha1.ValkeyConfigValue{"maxmemory": "128mb", "maxmemory-policy": "volatile-lru"}
}

func planOf(t *testing.T, v *giteav1alpha1.Valkey) *plan.Plan {
	t.Helper()
	p, err := plan.NewPlan(t.Context(), ResourceManager{}, v, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAddResources_Golden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		valkey *giteav1alpha1.Valkey
	}{
		{"defaults", defaulted()},
		{"configured", defaulted(configured)},
	} {
		t.Run(tc.name, func(t *testing.T) { controllertest.AssertPlan(t, planOf(t, tc.valkey), tc.name) })
	}
}

func TestAddResources_Graph(t *testing.T) {
	for _, tc := range []struct {
		name     string
		valkey   *giteav1alpha1.Valkey
		wantConf string
	}{
		{
			name:     "defaults: a cache without persistence",
			valkey:   defaulted(),
			wantConf: "appendonly no\ndir /data\nmaxmemory-policy allkeys-lru\nport 6379\nsave \"\"\n",
		},
		{
			name:     "spec.config added and overriding a default, sorted",
			valkey:   defaulted(configured),
			wantConf: "appendonly no\ndir /data\nmaxmemory 128mb\nmaxmemory-policy volatile-lru\nport 6379\nsave \"\"\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.valkey)
			var ids []string
			for _, n := range p.Nodes {
				ids = append(ids, n.ID.String())
				if n.CreateOnly || n.Adopt {
					t.Errorf("%s: create-only %v adopt %v, want neither", n.ID, n.CreateOnly, n.Adopt)
				}
			}
			if want := []string{"ConfigMap default/demo-valkey-config", "Deployment default/demo-valkey", "Service default/demo-valkey"}; !slices.Equal(ids, want) {
				t.Fatalf("nodes = %v, want %v", ids, want)
			}
			// The Deployment waits for its configuration (and gets its hash: a change rolls it).
			if got := p.Nodes[1].Blockers; len(got) != 1 || got[0] != p.Nodes[0].ID {
				t.Errorf("Deployment blockers = %v, want the ConfigMap", got)
			}
			if got := p.Nodes[0].Object.(*corev1.ConfigMap).Data["valkey.conf"]; got != tc.wantConf {
				t.Errorf("valkey.conf:\n%s\nwant:\n%s", got, tc.wantConf)
			}
			d := p.Nodes[1].Object.(*appsv1.Deployment)
			pod := d.Spec.Template.Spec
			c := pod.Containers[0]
			if c.Image != "docker.io/valkey/valkey:8.1" || !slices.Equal(c.Args, []string{"valkey-server", "/etc/valkey/valkey.conf"}) {
				t.Errorf("container %s %v, want valkey 8.1 reading the ConfigMap's file", c.Image, c.Args)
			}
			if sc := pod.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) == 0 {
				t.Errorf("pod security context %+v, want non-root", sc)
			}
			if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
				t.Errorf("container security context %+v, want a read-only root filesystem", sc)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("requests %v, want CPU and memory", c.Resources.Requests)
			}
			if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				t.Errorf("strategy %s, want Recreate", d.Spec.Strategy.Type)
			}
			svc := p.Nodes[2].Object.(*corev1.Service)
			if svc.Spec.Ports[0].Port != Port || !maps.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
				t.Errorf("Service %+v does not select the Deployment's pods on %d", svc.Spec, Port)
			}
			if got, want := Address("demo-valkey", "default"), "demo-valkey.default.svc:6379"; got != want {
				t.Errorf("Address = %s, want %s", got, want)
			}
		})
	}
}

// TestValidate_ConfigCannotInjectDirectives: a reserved key in any case, or a line break in a
// value, would change directives the operator owns (issue 20, item 8): terminal errors.
func TestValidate_ConfigCannotInjectDirectives(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config map[string]giteav1alpha1.ValkeyConfigValue
		ok     bool
	}{
		{"plain settings", map[string]giteav1alpha1.ValkeyConfigValue{"maxmemory": "64mb", "maxmemory-policy": "allkeys-lru"}, true},
		{"reserved key upper case", map[string]giteav1alpha1.ValkeyConfigValue{"BIND": "127.0.0.1"}, false},
		{"reserved key mixed case", map[string]giteav1alpha1.ValkeyConfigValue{"Port": "7000"}, false},
		{"newline in a value", map[string]giteav1alpha1.ValkeyConfigValue{"maxmemory": "64mb\nrequirepass x"}, false},
		{"carriage return in a value", map[string]giteav1alpha1.ValkeyConfigValue{"maxmemory": "64mb\rrequirepass x"}, false},
		{"space in a key", map[string]giteav1alpha1.ValkeyConfigValue{"requirepass x\nmaxmemory": "1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ResourceManager{}.Validate(t.Context(), defaulted(func(v *giteav1alpha1.Valkey) { v.Spec.Config = tc.config }))
			if tc.ok != (err == nil) {
				t.Fatalf("Validate = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
				t.Errorf("Validate error %v is not terminal", err)
			}
		})
	}
}
