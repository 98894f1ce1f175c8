package postgresql

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/internal/operatortest"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// scheme holds client-go's types and the reference operator's API.
var scheme = operatortest.Scheme()

// defaulted returns the PostgreSQL a Gitea demo creates, as the API server defaults it from
// the CRD (controllertest.Defaulted), changed by mods.
func defaulted(mods ...func(*giteav1alpha1.PostgreSQL)) *giteav1alpha1.PostgreSQL {
	pg := &giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-postgresql", UID: "00000000-0000-0000-0000-000000000003"}}
	utilruntime.Must(api.Default(pg))
	for _, mod := range mods {
		mod(pg)
	}
	return pg
}

func tuned(pg *giteav1alpha1.PostgreSQL) {
	pg.Spec.Version = "17.6"
	pg.Spec.Storage = giteav1alpha1.StorageSpec{Size: resource.MustParse("20Gi"), StorageClassName: ptr.To("fast")}
	pg.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	pg.Spec.Database, pg.Spec.User = "forge", "forge_owner"
}

func planOf(t *testing.T, pg *giteav1alpha1.PostgreSQL) *plan.Plan {
	t.Helper()
	p, err := plan.NewPlan(t.Context(), ResourceManager{}, pg, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAddResources_Golden(t *testing.T) {
	for _, tc := range []struct {
		name string
		pg   *giteav1alpha1.PostgreSQL
	}{
		{"defaults", defaulted()},
		{"tuned", defaulted(tuned)},
		{"delete", defaulted(func(pg *giteav1alpha1.PostgreSQL) { pg.Spec.Storage.DeletionPolicy = giteav1alpha1.StorageDelete })},
	} {
		t.Run(tc.name, func(t *testing.T) { controllertest.AssertPlan(t, planOf(t, tc.pg), tc.name) })
	}
}

func TestAddResources_Graph(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pg        *giteav1alpha1.PostgreSQL
		wantImage string
		wantUser  string
		wantDB    string
		wantClass *string
	}{
		{"defaults", defaulted(), "docker.io/library/postgres:17", "gitea", "gitea", nil},
		{"tuned", defaulted(tuned), "docker.io/library/postgres:17.6", "forge_owner", "forge", ptr.To("fast")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.pg)
			var ids []string
			for _, n := range p.Nodes {
				ids = append(ids, n.ID.String())
			}
			if want := []string{"Secret default/demo-postgresql-credentials", "Service default/demo-postgresql",
				"PersistentVolumeClaim default/data-demo-postgresql-0", "StatefulSet default/demo-postgresql"}; !slices.Equal(ids, want) {
				t.Fatalf("nodes = %v, want %v", ids, want)
			}
			secretNode, claimNode, stsNode := p.Nodes[0], p.Nodes[2], p.Nodes[3]
			if !secretNode.CreateOnly || stsNode.CreateOnly || p.Nodes[1].CreateOnly || claimNode.CreateOnly {
				t.Error("only the credentials Secret must be create-only (its password is generated once)")
			}
			if got := []graph.NodeID{claimNode.ID, secretNode.ID, p.Nodes[1].ID}; !slices.Equal(stsNode.Blockers, got) {
				t.Errorf("StatefulSet blockers = %v, want the claim, the Secret and the Service", stsNode.Blockers)
			}
			// The data claim is created after the key that opens it (ProtectsData), and the
			// StatefulSet is re-created, its pod orphaned, when its claim template changes.
			if got := []graph.NodeID{secretNode.ID}; !slices.Equal(claimNode.Blockers, got) || !claimNode.Adopt {
				t.Errorf("claim blockers %v adopt %v, want after the Secret and adopting the StatefulSet controller's claim", claimNode.Blockers, claimNode.Adopt)
			}
			if stsNode.Recreate != metav1.DeletePropagationOrphan {
				t.Errorf("StatefulSet Recreate = %q, want Orphan: growing the volume must not stop the server", stsNode.Recreate)
			}

			// The Secret has the keys GiteaServer reads: the component's output.
			secret := secretNode.Object.(*corev1.Secret)
			want := map[string]string{
				giteav1alpha1.DatabaseSecretHostKey:     "demo-postgresql.default.svc",
				giteav1alpha1.DatabaseSecretPortKey:     "5432",
				giteav1alpha1.DatabaseSecretUserKey:     tc.wantUser,
				giteav1alpha1.DatabaseSecretDatabaseKey: tc.wantDB,
			}
			for k, v := range want {
				if secret.StringData[k] != v {
					t.Errorf("credentials %s = %q, want %q", k, secret.StringData[k], v)
				}
			}
			if pw := secret.StringData[giteav1alpha1.DatabaseSecretPasswordKey]; len(pw) < 24 {
				t.Errorf("generated password has %d characters, want at least 24", len(pw))
			}
			if again := planOf(t, tc.pg).Nodes[0].Object.(*corev1.Secret); again.StringData["password"] == secret.StringData["password"] {
				t.Error("two plans generated the same password: it is not random")
			}

			sts := stsNode.Object.(*appsv1.StatefulSet)
			if sts.Spec.ServiceName != "demo-postgresql" || *sts.Spec.Replicas != 1 {
				t.Errorf("StatefulSet serviceName %q replicas %d, want the headless Service and 1", sts.Spec.ServiceName, *sts.Spec.Replicas)
			}
			pod := sts.Spec.Template.Spec
			c := pod.Containers[0]
			if c.Image != tc.wantImage {
				t.Errorf("image = %s, want %s", c.Image, tc.wantImage)
			}
			if sc := pod.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) != 999 {
				t.Errorf("pod security context %+v, want non-root user 999 (postgres)", sc)
			}
			if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
				t.Errorf("container security context %+v, want a read-only root filesystem", sc)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("requests %v, want CPU and memory", c.Resources.Requests)
			}
			for _, e := range c.Env {
				if e.Name == "POSTGRES_PASSWORD" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "demo-postgresql-credentials") {
					t.Errorf("POSTGRES_PASSWORD = %+v, want it from the credentials Secret", e)
				}
			}
			// Every writable path is a volume: the data claim, or an emptyDir.
			mounts := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = m.Name
			}
			if mounts["/var/lib/postgresql/data"] != "data" || mounts["/var/run/postgresql"] == "" || mounts["/tmp"] == "" {
				t.Errorf("mounts %v, want data, the socket directory and /tmp", mounts)
			}
			claim := sts.Spec.VolumeClaimTemplates[0]
			if claim.Name != "data" || !claim.Spec.Resources.Requests.Storage().Equal(tc.pg.Spec.Storage.Size) ||
				!equalPtr(claim.Spec.StorageClassName, tc.wantClass) {
				t.Errorf("claim template %s %v class %v, want data %v class %v", claim.Name,
					claim.Spec.Resources.Requests.Storage(), claim.Spec.StorageClassName, tc.pg.Spec.Storage.Size.String(), tc.wantClass)
			}
			// The claim kdag creates is the one the template names for pod 0, with the same spec
			// and labels, so that the StatefulSet controller mounts it instead of making its own.
			data := claimNode.Object.(*corev1.PersistentVolumeClaim)
			if want := claim.Name + "-" + sts.Name + "-0"; data.Name != want {
				t.Errorf("data claim %s, want %s (template %s of StatefulSet %s, ordinal 0)", data.Name, want, claim.Name, sts.Name)
			}
			if !equality.Semantic.DeepEqual(data.Spec, claim.Spec) || !maps.Equal(data.Labels, claim.Labels) {
				t.Errorf("data claim spec %+v labels %v, want the template's %+v %v", data.Spec, data.Labels, claim.Spec, claim.Labels)
			}
			if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				t.Errorf("claim retention %+v, want WhenDeleted Retain: the claim is kdag's, deleting the StatefulSet must not take it", p)
			}
		})
	}
}

func equalPtr(a, b *string) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		length  int
		wantErr bool
	}{
		{len("demo-postgresql"), false},
		{MaxNameLength, false},
		{MaxNameLength + 1, true},
	} {
		name := "p" + strings.Repeat("x", tc.length-1)
		err := ResourceManager{}.Validate(t.Context(), defaulted(func(pg *giteav1alpha1.PostgreSQL) { pg.Name = name }))
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), `StatefulSet "`+name+`"`)):
			t.Errorf("Validate(%d characters) = %v, want an error naming the StatefulSet", tc.length, err)
		case tc.wantErr && !errors.Is(err, reconcile.TerminalError(nil)):
			t.Errorf("Validate(%d characters) = %v, want a terminal error: a name only changes with the spec", tc.length, err)
		case !tc.wantErr && err != nil:
			t.Errorf("Validate(%d characters) = %v, want nil", tc.length, err)
		}
	}
}
