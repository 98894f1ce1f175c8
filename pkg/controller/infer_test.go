package controller_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/graph"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// inferRM is a ResourceManager whose graph is build's, owning every kind inference reads.
type inferRM struct{ build func(b *controller.Graph) }

func (inferRM) OwnedTypes() []client.Object {
	return []client.Object{
		&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.PersistentVolumeClaim{}, &corev1.ServiceAccount{},
		&corev1.Service{}, &corev1.Pod{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{},
		&batchv1.Job{}, &batchv1.CronJob{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{},
		&rbacv1.ClusterRoleBinding{}, &networkingv1.Ingress{},
	}
}

func (rm inferRM) AddResources(_ context.Context, _ *testapi.Widget, b *controller.Graph) error {
	rm.build(b)
	return nil
}

// inferScheme and inferMapper know the kinds of inferRM, ClusterRoles and ClusterRoleBindings
// cluster-scoped.
func inferScheme(t *testing.T) (*runtime.Scheme, meta.RESTMapper) {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(testapi.AddToScheme(scheme))
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, obj := range (inferRM{}).OwnedTypes() {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		scope := meta.RESTScopeNamespace
		if k := gvks[0].Kind; k == "ClusterRole" || k == "ClusterRoleBinding" {
			scope = meta.RESTScopeRoot
		}
		mapper.Add(gvks[0], scope)
	}
	return scheme, mapper
}

// inferPlan plans build's graph for the Widget ns/app.
func inferPlan(t *testing.T, build func(b *controller.Graph)) (*plan.Plan, error) {
	t.Helper()
	scheme, mapper := inferScheme(t)
	owner := &testapi.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}
	return plan.NewPlan(t.Context(), inferRM{build: build}, owner, scheme, mapper)
}

// edges lists the plan's edges as "dependent <- blocker", inferred ones marked " (inferred)"
// and order-only ones " (order only)", sorted.
func edges(p *plan.Plan) []string {
	var out []string
	for _, n := range p.Nodes {
		for _, bl := range n.Blockers {
			e := n.ID.String() + " <- " + bl.String()
			if slices.Contains(n.Inferred, bl) {
				e += " (inferred)"
			}
			if slices.Contains(n.OrderOnly, bl) {
				e += " (order only)"
			}
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

func om(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func configMap(name string) *corev1.ConfigMap { return &corev1.ConfigMap{ObjectMeta: om(name)} }
func secret(name string) *corev1.Secret       { return &corev1.Secret{ObjectMeta: om(name)} }
func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: om(name)}
}

// podSpec is a pod spec with one container, changed by mutate.
func podSpec(mutate func(*corev1.PodSpec)) corev1.PodTemplateSpec {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}
	mutate(&spec)
	return corev1.PodTemplateSpec{Spec: spec}
}

func deploymentWith(mutate func(*corev1.PodSpec)) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: om("web"), Spec: appsv1.DeploymentSpec{Template: podSpec(mutate)}}
}

func configMapVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
}

func TestInferredDependencies(t *testing.T) {
	ref := func(name string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: name} }
	cases := []struct {
		name  string
		build func(b *controller.Graph)
		want  []string
	}{{
		name: "Deployment volume configMap",
		build: func(b *controller.Graph) {
			b.Add(configMap("conf"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }))
		},
		want: []string{"Deployment ns/web <- ConfigMap ns/conf (inferred)"},
	}, {
		name: "StatefulSet volume secret and serviceName",
		build: func(b *controller.Graph) {
			b.Add(secret("tls"))
			b.Add(&corev1.Service{ObjectMeta: om("db-headless")})
			b.Add(&appsv1.StatefulSet{ObjectMeta: om("db"), Spec: appsv1.StatefulSetSpec{
				ServiceName: "db-headless",
				Template: podSpec(func(p *corev1.PodSpec) {
					p.Volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{
						Secret: &corev1.SecretVolumeSource{SecretName: "tls"}}}}
				})}})
		},
		want: []string{"StatefulSet ns/db <- Secret ns/tls (inferred)", "StatefulSet ns/db <- Service ns/db-headless (inferred)"},
	}, {
		name: "DaemonSet volume persistentVolumeClaim",
		build: func(b *controller.Graph) {
			b.Add(claim("data"))
			b.Add(&appsv1.DaemonSet{ObjectMeta: om("agent"), Spec: appsv1.DaemonSetSpec{Template: podSpec(func(p *corev1.PodSpec) {
				p.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
			})}})
		},
		want: []string{"DaemonSet ns/agent <- PersistentVolumeClaim ns/data (inferred)"},
	}, {
		name: "Job projected volume configMap and secret",
		build: func(b *controller.Graph) {
			b.Add(configMap("conf"))
			b.Add(secret("token"))
			b.Add(&batchv1.Job{ObjectMeta: om("migrate"), Spec: batchv1.JobSpec{Template: podSpec(func(p *corev1.PodSpec) {
				p.Volumes = []corev1.Volume{{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: ref("conf")}},
						{Secret: &corev1.SecretProjection{LocalObjectReference: ref("token")}},
					}}}}}
			})}})
		},
		want: []string{"Job ns/migrate <- ConfigMap ns/conf (inferred)", "Job ns/migrate <- Secret ns/token (inferred)"},
	}, {
		name: "CronJob env valueFrom configMapKeyRef and secretKeyRef",
		build: func(b *controller.Graph) {
			b.Add(configMap("conf"))
			b.Add(secret("db"))
			b.Add(&batchv1.CronJob{ObjectMeta: om("backup"), Spec: batchv1.CronJobSpec{Schedule: "@daily",
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podSpec(func(p *corev1.PodSpec) {
					p.Containers[0].Env = []corev1.EnvVar{
						{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: ref("conf"), Key: "mode"}}},
						{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: ref("db"), Key: "password"}}},
					}
				})}}}})
		},
		want: []string{"CronJob ns/backup <- ConfigMap ns/conf (inferred)", "CronJob ns/backup <- Secret ns/db (inferred)"},
	}, {
		name: "envFrom configMapRef and secretRef, in an init container",
		build: func(b *controller.Graph) {
			b.Add(configMap("conf"))
			b.Add(secret("db"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) {
				p.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", EnvFrom: []corev1.EnvFromSource{
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("conf")}},
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("db")}},
				}}}
			}))
		},
		want: []string{"Deployment ns/web <- ConfigMap ns/conf (inferred)", "Deployment ns/web <- Secret ns/db (inferred)"},
	}, {
		name: "imagePullSecrets",
		build: func(b *controller.Graph) {
			b.Add(secret("registry"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.ImagePullSecrets = []corev1.LocalObjectReference{ref("registry")} }))
		},
		want: []string{"Deployment ns/web <- Secret ns/registry (inferred)"},
	}, {
		name: "serviceAccountName",
		build: func(b *controller.Graph) {
			b.Add(&corev1.ServiceAccount{ObjectMeta: om("runner")})
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.ServiceAccountName = "runner" }))
		},
		want: []string{"Deployment ns/web <- ServiceAccount ns/runner (inferred)"},
	}, {
		name: "RoleBinding to its Role and to a ClusterRole",
		build: func(b *controller.Graph) {
			b.Add(&rbacv1.Role{ObjectMeta: om("reader")})
			b.Add(&rbacv1.ClusterRole{ObjectMeta: om("viewer")})
			b.Add(&rbacv1.RoleBinding{ObjectMeta: om("reader"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"}})
			b.Add(&rbacv1.RoleBinding{ObjectMeta: om("viewer"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "viewer"}})
		},
		want: []string{"RoleBinding ns/reader <- Role ns/reader (inferred)", "RoleBinding ns/viewer <- ClusterRole viewer (inferred)"},
	}, {
		name: "ClusterRoleBinding to its ClusterRole",
		build: func(b *controller.Graph) {
			b.Add(&rbacv1.ClusterRole{ObjectMeta: om("viewer")})
			b.Add(&rbacv1.ClusterRoleBinding{ObjectMeta: om("viewer"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "viewer"}})
		},
		want: []string{"ClusterRoleBinding viewer <- ClusterRole viewer (inferred)"},
	}, {
		name: "Ingress to its backend Services and TLS Secret",
		build: func(b *controller.Graph) {
			b.Add(&corev1.Service{ObjectMeta: om("web")})
			b.Add(&corev1.Service{ObjectMeta: om("fallback")})
			b.Add(secret("cert"))
			pathType := networkingv1.PathTypePrefix
			b.Add(&networkingv1.Ingress{ObjectMeta: om("web"), Spec: networkingv1.IngressSpec{
				DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "fallback"}},
				TLS:            []networkingv1.IngressTLS{{Hosts: []string{"example.com"}, SecretName: "cert"}},
				Rules: []networkingv1.IngressRule{{Host: "example.com", IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &pathType,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web"}},
					}}}}}},
			}})
		},
		want: []string{"Ingress ns/web <- Secret ns/cert (inferred)", "Ingress ns/web <- Service ns/fallback (inferred)",
			"Ingress ns/web <- Service ns/web (inferred)"},
	}, {
		name: "a Reference node counts",
		build: func(b *controller.Graph) {
			b.Reference(secret("user-db"), controller.RequireKeys("password"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) {
				p.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: ref("user-db")}}}
			}))
		},
		want: []string{"Deployment ns/web <- Secret ns/user-db (inferred)"},
	}, {
		name: "Pod",
		build: func(b *controller.Graph) {
			b.Add(configMap("conf"))
			b.Add(&corev1.Pod{ObjectMeta: om("one"), Spec: podSpec(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }).Spec})
		},
		want: []string{"Pod ns/one <- ConfigMap ns/conf (inferred)"},
	}, {
		name: "references twice, one edge",
		build: func(b *controller.Graph) {
			b.Add(configMap("conf"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) {
				p.Volumes = []corev1.Volume{configMapVolume("conf")}
				p.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: ref("conf")}}}
			}))
		},
		want: []string{"Deployment ns/web <- ConfigMap ns/conf (inferred)"},
	}, {
		name: "NoInferredDependencies opts out",
		build: func(b *controller.Graph) {
			b.Add(configMap("conf"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }),
				controller.NoInferredDependencies())
		},
		want: nil,
	}, {
		name: "declared DependsOn wins",
		build: func(b *controller.Graph) {
			conf := b.Add(configMap("conf"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }),
				controller.DependsOn(conf))
		},
		want: []string{"Deployment ns/web <- ConfigMap ns/conf"},
	}, {
		name: "declared After wins and stays order only",
		build: func(b *controller.Graph) {
			conf := b.Add(configMap("conf"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }),
				controller.After(conf))
		},
		want: []string{"Deployment ns/web <- ConfigMap ns/conf (order only)"},
	}, {
		name: "another namespace, no edge",
		build: func(b *controller.Graph) {
			b.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "conf"}})
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }))
		},
		want: nil,
	}, {
		name: "an object not in the graph, no edge",
		build: func(b *controller.Graph) {
			b.Add(configMap("other"))
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }))
		},
		want: nil,
	}, {
		name: "a Role in another namespace, no edge",
		build: func(b *controller.Graph) {
			b.Add(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "reader"}})
			b.Add(&rbacv1.RoleBinding{ObjectMeta: om("reader"), RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"}})
		},
		want: nil,
	}, {
		name: "a node referencing one added later",
		build: func(b *controller.Graph) {
			b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }))
			b.Add(configMap("conf"))
		},
		want: []string{"Deployment ns/web <- ConfigMap ns/conf (inferred)"},
	}, {
		name: "an inferred edge that would close a cycle is dropped",
		build: func(b *controller.Graph) {
			web := b.Add(deploymentWith(func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMapVolume("conf")} }))
			b.Add(configMap("conf"), controller.DependsOn(web))
		},
		want: []string{"ConfigMap ns/conf <- Deployment ns/web"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := inferPlan(t, tc.build)
			if err != nil {
				t.Fatal(err)
			}
			if got := edges(p); !slices.Equal(got, tc.want) {
				t.Errorf("edges:\n got %q\nwant %q", got, tc.want)
			}
			// Every node comes after its blockers: the graph can run.
			seen := map[graph.NodeID]bool{}
			for _, n := range p.Nodes {
				for _, bl := range n.Blockers {
					if !seen[bl] {
						t.Errorf("%s comes before its blocker %s", n.ID, bl)
					}
				}
				seen[n.ID] = true
			}
		})
	}
}

// TestInferredDependencies_Order checks that a node referencing nodes added after it moves
// just after them, the others keeping the order of their Add calls.
func TestInferredDependencies_Order(t *testing.T) {
	p, err := inferPlan(t, func(b *controller.Graph) {
		b.Add(&corev1.Service{ObjectMeta: om("web")})
		b.Add(deploymentWith(func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{configMapVolume("conf")}
			p.ServiceAccountName = "runner"
		}))
		b.Add(configMap("unrelated"))
		b.Add(configMap("conf"))
		b.Add(&corev1.ServiceAccount{ObjectMeta: om("runner")})
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range p.Nodes {
		got = append(got, n.ID.String())
	}
	want := []string{"Service ns/web", "ConfigMap ns/conf", "ServiceAccount ns/runner", "Deployment ns/web", "ConfigMap ns/unrelated"}
	if !slices.Equal(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
}

// TestInferredDependencies_Rendered checks that plans mark inferred edges: "(inferred)" in text,
// dashed in DOT, dotted in Mermaid; declared edges stay plain.
func TestInferredDependencies_Rendered(t *testing.T) {
	p, err := inferPlan(t, func(b *controller.Graph) {
		conf := b.Add(configMap("conf"))
		b.Add(secret("db"))
		b.Add(deploymentWith(func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{configMapVolume("conf")}
			p.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}
		}), controller.DependsOn(conf))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Nodes[2].String(), "Deployment ns/web  (after ConfigMap ns/conf, Secret ns/db (inferred))"; got != want {
		t.Errorf("text: got %q, want %q", got, want)
	}
	var dot, mermaid bytes.Buffer
	if err := p.WriteDOT(&dot); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteMermaid(&mermaid); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  n0 -> n2;\n", "  n1 -> n2 [style=dashed];\n"} {
		if !strings.Contains(dot.String(), want) {
			t.Errorf("DOT lacks %q:\n%s", want, dot.String())
		}
	}
	for _, want := range []string{"  n0 --> n2\n", "  n1 -.-> n2\n"} {
		if !strings.Contains(mermaid.String(), want) {
			t.Errorf("Mermaid lacks %q:\n%s", want, mermaid.String())
		}
	}
}

// TestNoInferredDependencies_OnReference checks that the option is refused on a Reference, like
// every option but RequireKeys.
func TestNoInferredDependencies_OnReference(t *testing.T) {
	_, err := inferPlan(t, func(b *controller.Graph) {
		b.Reference(secret("user-db"), controller.NoInferredDependencies())
	})
	var build *controller.GraphError
	if !errors.As(err, &build) {
		t.Fatalf("err = %v, want a GraphError", err)
	}
}
