package giteaserver

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/internal/operatortest"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	kgraph "github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
)

// scheme holds client-go's types and the reference operator's API.
var scheme = operatortest.Scheme()

// defaulted returns the GiteaServer a Gitea demo with a managed database creates, with the
// fields the CRD defaults filled, changed by mods.
func defaulted(mods ...func(*giteav1alpha1.GiteaServer)) *giteav1alpha1.GiteaServer {
	timeout, err := time.ParseDuration(giteav1alpha1.DefaultMigrationTimeout)
	if err != nil {
		panic(err)
	}
	s := &giteav1alpha1.GiteaServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo", UID: "00000000-0000-0000-0000-000000000002"},
		Spec: giteav1alpha1.GiteaServerSpec{
			Version:  giteav1alpha1.DefaultGiteaVersion,
			Image:    giteav1alpha1.DefaultGiteaImage,
			Replicas: 1,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
			}},
			Storage: giteav1alpha1.ServerStorageSpec{
				StorageSpec: giteav1alpha1.StorageSpec{Size: resource.MustParse(giteav1alpha1.DefaultStorageSize), DeletionPolicy: giteav1alpha1.StorageRetain},
				AccessMode:  corev1.ReadWriteOnce,
			},
			Database:         giteav1alpha1.ServerDatabaseSpec{SecretRef: giteav1alpha1.SecretReference{Name: "demo-postgresql-credentials"}},
			MigrationTimeout: metav1.Duration{Duration: timeout},
		},
	}
	for _, mod := range mods {
		mod(s)
	}
	return s
}

func withCache(s *giteav1alpha1.GiteaServer) {
	s.Spec.Cache = &giteav1alpha1.ServerCacheSpec{Address: "demo-valkey.default.svc:6379"}
}

func withIngressAndAdmin(s *giteav1alpha1.GiteaServer) {
	s.Spec.Ingress = &giteav1alpha1.IngressSpec{Host: "git.example.com", TLSSecretName: "git-example-com-tls", ClassName: ptr.To("nginx")}
	s.Spec.Admin = &giteav1alpha1.AdminSpec{SecretRef: giteav1alpha1.SecretReference{Name: "gitea-admin"}}
	s.Spec.ExtraEnv = []corev1.EnvVar{{Name: "GITEA__server__LANDING_PAGE", Value: "explore"}}
	s.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	s.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gitea", Effect: corev1.TaintEffectNoSchedule}}
	s.Spec.PodAnnotations = map[string]string{"prometheus.io/scrape": "true"}
}

func replicated(s *giteav1alpha1.GiteaServer) {
	s.Spec.Replicas = 3
	s.Spec.Storage.AccessMode = corev1.ReadWriteMany
	s.Spec.Storage.StorageClassName = ptr.To("nfs")
	s.Spec.Ingress = &giteav1alpha1.IngressSpec{Host: "git.example.com"}
}

func planOf(t *testing.T, s *giteav1alpha1.GiteaServer) *plan.Plan {
	t.Helper()
	p, err := plan.NewPlan(t.Context(), ResourceManager{}, s, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAddResources_Golden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server *giteav1alpha1.GiteaServer
	}{
		{"minimal", defaulted()},
		{"ingress_admin_cache", defaulted(withCache, withIngressAndAdmin)},
		{"replicated", defaulted(withCache, replicated)},
	} {
		t.Run(tc.name, func(t *testing.T) { controllertest.AssertPlan(t, planOf(t, tc.server), tc.name) })
	}
}

// node returns the plan's node of kind and name, or nil.
func node(p *plan.Plan, kind, name string) *plan.PlannedNode {
	for i := range p.Nodes {
		if p.Nodes[i].ID.Kind == kind && p.Nodes[i].ID.Name == name {
			return &p.Nodes[i]
		}
	}
	return nil
}

func index(p *plan.Plan, kind, name string) int {
	return slices.IndexFunc(p.Nodes, func(n plan.PlannedNode) bool { return n.ID.Kind == kind && n.ID.Name == name })
}

func blockers(n *plan.PlannedNode) []string {
	var out []string
	for _, b := range n.Blockers {
		out = append(out, b.Kind+" "+b.Name)
	}
	return out
}

// marked returns the "Kind name" of n's blockers in ids (Inferred or OrderOnly), in order.
func marked(ids []kgraph.NodeID) []string {
	var out []string
	for _, b := range ids {
		out = append(out, b.Kind+" "+b.Name)
	}
	return out
}

// TestAddResources_Graph checks the edges and options the golden files show.
func TestAddResources_Graph(t *testing.T) {
	for _, tc := range []struct {
		name        string
		server      *giteav1alpha1.GiteaServer
		wantIngress bool
		wantAdmin   bool
		wantCache   bool
		wantURL     string
		wantRolling bool
	}{
		{name: "minimal", server: defaulted(), wantURL: "http://demo-http.default.svc:3000/"},
		{
			name: "ingress, admin, cache", server: defaulted(withCache, withIngressAndAdmin),
			wantIngress: true, wantAdmin: true, wantCache: true, wantURL: "https://git.example.com/",
		},
		{
			name: "replicated", server: defaulted(withCache, replicated),
			wantIngress: true, wantCache: true, wantURL: "http://git.example.com/", wantRolling: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.server)
			job := node(p, "Job", "demo-migrate-1-27-3")
			deploy := node(p, "Deployment", "demo")
			secret := node(p, "Secret", "demo-secrets")
			if job == nil || deploy == nil || secret == nil {
				t.Fatalf("plan lacks the migration Job, the Deployment or the Secret: %v", p.Nodes)
			}
			// The migration Job comes before the server, which also needs its data claim.
			if index(p, "Job", "demo-migrate-1-27-3") > index(p, "Deployment", "demo") {
				t.Error("the migration Job is added after the Deployment")
			}
			// The database Secret is the database component's (or the user's): a reference.
			if db := node(p, "Secret", "demo-postgresql-credentials"); db == nil || !db.Reference {
				t.Errorf("database Secret node %v, want a reference", db)
			}
			if got, want := blockers(deploy), []string{"Job demo-migrate-1-27-3", "Secret demo-postgresql-credentials", "Secret demo-secrets", "ConfigMap demo-config", "PersistentVolumeClaim demo-data"}; !slices.Equal(got, want) {
				t.Errorf("Deployment blockers = %v, want %v", got, want)
			}
			if got, want := blockers(job), []string{"Secret demo-postgresql-credentials", "Secret demo-secrets", "ConfigMap demo-config"}; !slices.Equal(got, want) {
				t.Errorf("migration Job blockers = %v, want %v", got, want)
			}
			// What the pods mount and read is inferred from them (issue 15); the migration is
			// order only.
			if got, want := marked(deploy.Inferred), []string{"Secret demo-postgresql-credentials", "Secret demo-secrets", "ConfigMap demo-config", "PersistentVolumeClaim demo-data"}; !slices.Equal(got, want) {
				t.Errorf("Deployment inferred blockers = %v, want %v", got, want)
			}
			if got, want := marked(deploy.OrderOnly), []string{"Job demo-migrate-1-27-3"}; !slices.Equal(got, want) {
				t.Errorf("Deployment order-only blockers = %v, want %v", got, want)
			}
			if got, want := marked(job.Inferred), blockers(job); !slices.Equal(got, want) {
				t.Errorf("migration Job inferred blockers = %v, want all of them, %v", got, want)
			}
			if !job.CreateOnly || !secret.CreateOnly || deploy.CreateOnly {
				t.Errorf("create-only: Job %v, Secret %v, Deployment %v; want true, true, false", job.CreateOnly, secret.CreateOnly, deploy.CreateOnly)
			}
			if got := job.Object.(*batchv1.Job).Spec.ActiveDeadlineSeconds; got == nil || *got != 600 {
				t.Errorf("migration Job activeDeadlineSeconds = %v, want 600 (spec.migrationTimeout)", got)
			}

			ing := node(p, "Ingress", "demo")
			if (ing != nil) != tc.wantIngress {
				t.Errorf("Ingress in plan: %v, want %v", ing != nil, tc.wantIngress)
			}
			if ing != nil {
				// The Service is inferred from the backend; the certificate, declared order
				// only, comes first (a declared edge wins over the inferred one).
				want, wantOrderOnly := []string{"Service demo-http"}, []string(nil)
				if tls := tc.server.Spec.Ingress.TLSSecretName; tls != "" {
					// The certificate is the user's: a reference the Ingress waits for.
					want = append([]string{"Secret " + tls}, want...)
					wantOrderOnly = []string{"Secret " + tls}
					if ref := node(p, "Secret", tls); ref == nil || !ref.Reference || !slices.Equal(ref.RequireKeys, []string{"tls.crt", "tls.key"}) {
						t.Errorf("TLS Secret node %+v, want a reference requiring tls.crt and tls.key", ref)
					}
				}
				if got := blockers(ing); !slices.Equal(got, want) {
					t.Errorf("Ingress blockers = %v, want %v", got, want)
				}
				if got := marked(ing.OrderOnly); !slices.Equal(got, wantOrderOnly) {
					t.Errorf("Ingress order-only blockers = %v, want %v", got, wantOrderOnly)
				}
				if got := marked(ing.Inferred); !slices.Equal(got, []string{"Service demo-http"}) {
					t.Errorf("Ingress inferred blockers = %v, want [Service demo-http]", got)
				}
				backend := ing.Object.(*networkingv1.Ingress).Spec.Rules[0].HTTP.Paths[0].Backend.Service
				if backend.Name != "demo-http" || backend.Port.Name != "http" {
					t.Errorf("Ingress backend = %+v, want Service demo-http port http", backend)
				}
			}
			admin := node(p, "Job", "demo-admin")
			if (admin != nil) != tc.wantAdmin {
				t.Errorf("admin Job in plan: %v, want %v", admin != nil, tc.wantAdmin)
			}
			if admin != nil && (!admin.CreateOnly || !slices.Equal(blockers(admin), []string{"Deployment demo", "Secret gitea-admin"}) || len(admin.Inferred) > 0) {
				t.Errorf("admin Job: create-only %v, blockers %v; want create-only after the Deployment and the admin Secret", admin.CreateOnly, blockers(admin))
			}
			if secret := node(p, "Secret", "gitea-admin"); (secret != nil) != tc.wantAdmin || secret != nil && !secret.Reference {
				t.Errorf("admin Secret node %v, want a reference with the admin Job", secret)
			}

			ini := node(p, "ConfigMap", "demo-config").Object.(*corev1.ConfigMap).Data["app.ini"]
			for _, section := range []string{"[cache]", "[session]", "[queue]", "[global_lock]"} {
				if strings.Contains(ini, section) != tc.wantCache {
					t.Errorf("app.ini has %s: %v, want %v", section, !tc.wantCache, tc.wantCache)
				}
			}
			if tc.wantCache && (!strings.Contains(ini, "HOST = redis://demo-valkey.default.svc:6379/0") ||
				!strings.Contains(ini, "SERVICE_TYPE = redis\nSERVICE_CONN_STR = redis://demo-valkey.default.svc:6379/3")) {
				t.Errorf("app.ini does not point the cache at the Valkey:\n%s", ini)
			}
			// Without an admin Job the first user to register becomes the administrator.
			if got := strings.Contains(ini, "DISABLE_REGISTRATION = true"); got != tc.wantAdmin {
				t.Errorf("app.ini disables registration: %v, want %v (only with spec.admin)", got, tc.wantAdmin)
			}
			if !strings.Contains(ini, "ROOT_URL = "+tc.wantURL) {
				t.Errorf("app.ini ROOT_URL is not %s:\n%s", tc.wantURL, ini)
			}
			for _, secretWord := range []string{"PASSWD", "SECRET_KEY", "INTERNAL_TOKEN"} {
				if strings.Contains(ini, secretWord) {
					t.Errorf("app.ini (a ConfigMap) mentions %s: secrets belong in Secrets", secretWord)
				}
			}

			d := deploy.Object.(*appsv1.Deployment)
			if got := *d.Spec.Replicas; got != tc.server.Spec.Replicas {
				t.Errorf("Deployment replicas = %d, want %d", got, tc.server.Spec.Replicas)
			}
			wantStrategy := appsv1.RecreateDeploymentStrategyType
			if tc.wantRolling {
				wantStrategy = appsv1.RollingUpdateDeploymentStrategyType
			}
			if d.Spec.Strategy.Type != wantStrategy {
				t.Errorf("Deployment strategy = %s, want %s", d.Spec.Strategy.Type, wantStrategy)
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != "docker.gitea.com/gitea:1.27.3-rootless" {
				t.Errorf("server image = %s, want the rootless 1.27.3 image", got)
			}
		})
	}
}

// TestAddResources_PodsHardenedAndWired checks every pod the server runs (the server, the
// migration and the admin Jobs): non-root, read-only root filesystem, resource requests, and the
// database connection from the database Secret.
func TestAddResources_PodsHardenedAndWired(t *testing.T) {
	for _, tc := range []struct {
		name     string
		server   *giteav1alpha1.GiteaServer
		dbSecret string
	}{
		{"managed database", defaulted(withIngressAndAdmin), "demo-postgresql-credentials"},
		{"external database", defaulted(withIngressAndAdmin, func(s *giteav1alpha1.GiteaServer) {
			s.Spec.Database.SecretRef.Name = "gitea-external-db"
		}), "gitea-external-db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.server)
			pods := map[string]corev1.PodSpec{}
			for _, n := range p.Nodes {
				switch o := n.Object.(type) {
				case *appsv1.Deployment:
					pods[n.ID.String()] = o.Spec.Template.Spec
				case *batchv1.Job:
					pods[n.ID.String()] = o.Spec.Template.Spec
					if o.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
						t.Errorf("%s: restartPolicy %q, want Never", n.ID, o.Spec.Template.Spec.RestartPolicy)
					}
				}
			}
			if len(pods) != 3 {
				t.Fatalf("pods of %v, want the Deployment and two Jobs", slices.Sorted(maps.Keys(pods)))
			}
			for id, pod := range pods {
				if sc := pod.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) == 0 {
					t.Errorf("%s: pod security context %+v, want non-root", id, sc)
				}
				for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
					sc := c.SecurityContext
					if sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
						t.Errorf("%s container %s: security context %+v, want a read-only root filesystem without privilege escalation", id, c.Name, sc)
					}
				}
				main := pod.Containers[0]
				if main.Resources.Requests.Cpu().IsZero() || main.Resources.Requests.Memory().IsZero() {
					t.Errorf("%s: container %s requests %v, want CPU and memory", id, main.Name, main.Resources.Requests)
				}
				env := map[string]corev1.EnvVar{}
				for _, e := range main.Env {
					env[e.Name] = e
				}
				for _, name := range []string{"DB_HOST", "DB_PORT", "DB_NAME", "GITEA__database__USER", "GITEA__database__PASSWD"} {
					e := env[name]
					if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != tc.dbSecret {
						t.Errorf("%s: %s = %+v, want it from Secret %s", id, name, e, tc.dbSecret)
					}
				}
				if e := env["GITEA__security__SECRET_KEY"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "demo-secrets" {
					t.Errorf("%s: SECRET_KEY = %+v, want it from Secret demo-secrets", id, e)
				}
			}
			// The server and the admin Job mount the data claim; the migration needs none.
			claimOf := func(pod corev1.PodSpec) string {
				for _, v := range pod.Volumes {
					if v.Name == "data" && v.PersistentVolumeClaim != nil {
						return v.PersistentVolumeClaim.ClaimName
					}
				}
				return ""
			}
			for id, want := range map[string]string{
				"Deployment default/demo":         "demo-data",
				"Job default/demo-admin":          "demo-data",
				"Job default/demo-migrate-1-27-3": "",
			} {
				if got := claimOf(pods[id]); got != want {
					t.Errorf("%s mounts claim %q, want %q", id, got, want)
				}
			}
		})
	}
}

func TestMigrationJobName(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"1.27.3", "demo-migrate-1-27-3"},
		{"1.27.4", "demo-migrate-1-27-4"},
		{"1.28", "demo-migrate-1-28"},
	} {
		if got := MigrationJobName("demo", tc.version); got != tc.want {
			t.Errorf("MigrationJobName(demo, %s) = %s, want %s", tc.version, got, tc.want)
		}
	}
	// A new version is a new Job node, so the old one leaves the graph and is pruned.
	p := planOf(t, defaulted(func(s *giteav1alpha1.GiteaServer) { s.Spec.Version = "1.27.4" }))
	if node(p, "Job", "demo-migrate-1-27-4") == nil || node(p, "Job", "demo-migrate-1-27-3") != nil {
		t.Errorf("plan of 1.27.4 has Jobs %v, want only demo-migrate-1-27-4", p.Nodes)
	}
	if got := node(p, "Deployment", "demo").Object.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image; got != "docker.gitea.com/gitea:1.27.4-rootless" {
		t.Errorf("server image = %s", got)
	}
}
