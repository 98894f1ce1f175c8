package gitea

import (
	"bytes"
	"errors"
	"strings"
	"testing"

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

// defaulted returns the Gitea a Gitea demo creates, as the API server defaults it from the
// CRD (controllertest.Defaulted), changed by mods.
func defaulted(mods ...func(*giteav1alpha1.Gitea)) *giteav1alpha1.Gitea {
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo", UID: "00000000-0000-0000-0000-000000000001"}}
	utilruntime.Must(api.Default(g))
	for _, mod := range mods {
		mod(g)
	}
	return g
}

func external(g *giteav1alpha1.Gitea) {
	g.Spec.Database = giteav1alpha1.DatabaseSpec{
		Type:     giteav1alpha1.DatabaseExternal,
		External: &giteav1alpha1.ExternalDatabaseSpec{SecretRef: giteav1alpha1.SecretReference{Name: "gitea-external-db"}},
	}
}

func noCache(g *giteav1alpha1.Gitea) { g.Spec.Cache.Enabled = ptr.To(false) }

func planOf(t *testing.T, g *giteav1alpha1.Gitea) *plan.Plan {
	t.Helper()
	p, err := plan.NewPlan(t.Context(), ResourceManager{}, g, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAddResources_Golden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gitea *giteav1alpha1.Gitea
	}{
		{"managed_cache", defaulted()},
		{"external_database", defaulted(external)},
		{"no_cache", defaulted(noCache)},
	} {
		t.Run(tc.name, func(t *testing.T) { controllertest.AssertPlan(t, planOf(t, tc.gitea), tc.name) })
	}
}

// TestAddResources_Children checks what the golden files show: which children exist, that the
// server waits for them, and that it is wired to their outputs.
func TestAddResources_Children(t *testing.T) {
	for _, tc := range []struct {
		name          string
		gitea         *giteav1alpha1.Gitea
		wantNodes     []string
		wantSecret    string
		wantCacheAddr string // "" means no cache settings
	}{
		{
			name:  "managed database and cache",
			gitea: defaulted(),
			wantNodes: []string{
				"PostgreSQL default/demo-postgresql",
				"Valkey default/demo-valkey",
				"GiteaServer default/demo  (after PostgreSQL default/demo-postgresql, Valkey default/demo-valkey)",
			},
			wantSecret:    "demo-postgresql-credentials",
			wantCacheAddr: "demo-valkey.default.svc:6379",
		},
		{
			name:  "external database",
			gitea: defaulted(external),
			wantNodes: []string{
				"Valkey default/demo-valkey",
				"GiteaServer default/demo  (after Valkey default/demo-valkey)",
			},
			wantSecret:    "gitea-external-db",
			wantCacheAddr: "demo-valkey.default.svc:6379",
		},
		{
			name:  "cache disabled",
			gitea: defaulted(noCache),
			wantNodes: []string{
				"PostgreSQL default/demo-postgresql",
				"GiteaServer default/demo  (after PostgreSQL default/demo-postgresql)",
			},
			wantSecret: "demo-postgresql-credentials",
		},
		{
			name:  "external database, cache disabled",
			gitea: defaulted(external, noCache),
			wantNodes: []string{
				"GiteaServer default/demo",
			},
			wantSecret: "gitea-external-db",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.gitea)
			var lines []string
			for _, n := range p.Nodes {
				lines = append(lines, n.String())
			}
			if got, want := strings.Join(lines, "\n"), strings.Join(tc.wantNodes, "\n"); got != want {
				t.Errorf("nodes:\n%s\nwant:\n%s", got, want)
			}
			server := p.Nodes[len(p.Nodes)-1].Object.(*giteav1alpha1.GiteaServer)
			if got := server.Spec.Database.SecretRef.Name; got != tc.wantSecret {
				t.Errorf("server database secretRef = %q, want %q", got, tc.wantSecret)
			}
			switch {
			case tc.wantCacheAddr == "" && server.Spec.Cache != nil:
				t.Errorf("server cache = %+v, want none", server.Spec.Cache)
			case tc.wantCacheAddr != "" && (server.Spec.Cache == nil || server.Spec.Cache.Address != tc.wantCacheAddr):
				t.Errorf("server cache = %+v, want address %s", server.Spec.Cache, tc.wantCacheAddr)
			}
			// The server gets the user's settings.
			if server.Spec.Version != tc.gitea.Spec.Version || server.Spec.Image != tc.gitea.Spec.Image ||
				server.Spec.Replicas != tc.gitea.Spec.Replicas || !server.Spec.Storage.Size.Equal(tc.gitea.Spec.Storage.Size) {
				t.Errorf("server spec %+v does not carry the Gitea's version, image, replicas and storage", server.Spec)
			}
		})
	}
}

// A Gitea written as `database: {type: managed}` has no managed block: its PostgreSQL gets the
// same defaults the schema would have filled.
func TestAddResources_ManagedWithoutBlockGetsDefaults(t *testing.T) {
	render := func(g *giteav1alpha1.Gitea) string {
		var b bytes.Buffer
		if err := planOf(t, g).WriteText(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	withoutBlock := defaulted(func(g *giteav1alpha1.Gitea) {
		g.Spec.Database.Managed = nil
		// Without the block there are no resources either; the schema defaults them only when
		// the block is present.
	})
	want := defaulted(func(g *giteav1alpha1.Gitea) { g.Spec.Database.Managed.Resources = corev1.ResourceRequirements{} })
	if diff := controllertest.Diff(render(want), render(withoutBlock)); diff != "" {
		t.Errorf("managed database without a block differs from the defaults:\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	name := func(n int) string { return "g" + strings.Repeat("x", n-1) }
	for _, tc := range []struct {
		name    string
		gitea   *giteav1alpha1.Gitea
		wantErr []string // substrings of the error; nil means no error
		notIn   []string // substrings the error must not have
	}{
		{name: "sample name", gitea: defaulted()},
		{
			// 41 characters: the StatefulSet "<name>-postgresql" has 52, and its pods' label
			// controller-revision-hash "<name>-postgresql-<hash>" 63.
			name:  "longest name with a managed database",
			gitea: defaulted(func(g *giteav1alpha1.Gitea) { g.Name = name(41) }),
		},
		{
			name:    "one character too many for the database's StatefulSet",
			gitea:   defaulted(func(g *giteav1alpha1.Gitea) { g.Name = name(42) }),
			wantErr: []string{`StatefulSet "` + name(42) + `-postgresql"`, "controller-revision-hash", "use a shorter name"},
			notIn:   []string{"-migrate-", "-http", "-valkey"},
		},
		{
			// 48 characters: the migration Job "<name>-migrate-1-27-3" has 63.
			name:  "longest name with an external database",
			gitea: defaulted(external, func(g *giteav1alpha1.Gitea) { g.Name = name(48) }),
		},
		{
			name:    "one character too many for the migration Job",
			gitea:   defaulted(external, func(g *giteav1alpha1.Gitea) { g.Name = name(49) }),
			wantErr: []string{name(49) + "-migrate-1-27-3", "use a shorter name"},
			notIn:   []string{"-postgresql", name(49) + "-http", "-valkey"},
		},
		{
			name:    "too long for the database pod as well",
			gitea:   defaulted(func(g *giteav1alpha1.Gitea) { g.Name = name(51) }),
			wantErr: []string{name(51) + "-migrate-1-27-3", name(51) + "-postgresql-0", `StatefulSet "` + name(51) + `-postgresql"`},
		},
		{
			name:    "everything too long",
			gitea:   defaulted(func(g *giteav1alpha1.Gitea) { g.Name = name(60) }),
			wantErr: []string{name(60) + "-http", name(60) + "-valkey", name(60) + "-postgresql-0", name(60) + "-migrate-1-27-3"},
		},
		{
			// The longest name the API server accepts: the advice must survive the 1024-character
			// cap of condition messages, so it comes first, and the names are abbreviated so
			// that the rules they break fit too, with the suffix that says which object it is.
			name:  "253 characters",
			gitea: defaulted(func(g *giteav1alpha1.Gitea) { g.Name = name(253) }),
			wantErr: []string{"use a shorter name", "(253 characters) gives invalid names",
				`-http" (258 characters): must be no more than 63 characters`,
				`-valkey" (260 characters): must be no more than 63 characters`},
		},
		{
			name:    "cache disabled: no Valkey Service to check",
			gitea:   defaulted(external, noCache, func(g *giteav1alpha1.Gitea) { g.Name = name(59) }),
			wantErr: []string{name(59) + "-http"},
			notIn:   []string{"-valkey"},
		},
		{
			// A valid object name that is not a valid Service name.
			name:    "dot in the name",
			gitea:   defaulted(func(g *giteav1alpha1.Gitea) { g.Name = "git.example" }),
			wantErr: []string{`"git.example-http"`, "lowercase letters, digits and '-'"},
		},
		{
			name:    "leading digit",
			gitea:   defaulted(func(g *giteav1alpha1.Gitea) { g.Name = "1gitea" }),
			wantErr: []string{`"1gitea-http"`, "starts with a letter"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ResourceManager{}.Validate(t.Context(), tc.gitea)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate(%s) = %v, want nil", tc.gitea.Name, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%s) = nil, want an error naming %v", tc.gitea.Name, tc.wantErr)
			}
			if !errors.Is(err, reconcile.TerminalError(nil)) {
				t.Errorf("Validate error %q is not terminal: a name only changes with the spec", err)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Validate error %q does not name %q", err, s)
				}
			}
			if i := strings.Index(err.Error(), "use a shorter name"); i < 0 || i > 200 {
				t.Errorf("Validate error %q: the advice is not at its start", err)
			}
			for _, s := range tc.notIn {
				if strings.Contains(err.Error(), s) {
					t.Errorf("Validate error %q names %q, which is valid", err, s)
				}
			}
		})
	}
}
