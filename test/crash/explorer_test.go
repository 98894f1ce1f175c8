package crash_test

import (
	"context"
	"crypto/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// passwordRM gives each Widget w a password in two Secrets, applied in order: w-db-init (what a
// database would be initialised with) then w-app (what the app connects with). Neither is
// create-only: the password comes from the first of from (w-app or w-db-init) that exists,
// read from the API server, else it is new. Reading it back from w-app, the Secret written last,
// is the planted bug: a crash between the two writes leaves w-db-init with a password that no
// w-app records, and the next operator generates another one and rewrites w-db-init. Reading it
// from w-db-init, the Secret written first, is correct.
type passwordRM struct {
	cl   client.Client
	from string // "app" (the bug) or "db-init"
}

func (passwordRM) OwnedTypes() []client.Object { return []client.Object{&corev1.Secret{}} }

func (rm passwordRM) AddResources(ctx context.Context, w *testapi.Widget, b *controller.Graph) error {
	password := []byte(rand.Text())
	live := &corev1.Secret{}
	err := rm.cl.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Name + "-" + rm.from}, live)
	switch {
	case err == nil:
		password = live.Data["password"]
	case !apierrors.IsNotFound(err):
		return err
	}
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-" + name}, Data: map[string][]byte{"password": password}}
	}
	initNode := b.Add(secret("db-init"))
	b.Add(secret("app"), controller.DependsOn(initNode))
	return nil
}

// memoRM gives each Widget w a password in a Secret w-db-init, not create-only, remembered in
// the ResourceManager's memory: the planted bug of a component that keeps state a process
// restart loses.
type memoRM struct {
	mu        sync.Mutex
	passwords map[string][]byte
}

func (*memoRM) OwnedTypes() []client.Object { return []client.Object{&corev1.Secret{}} }

func (rm *memoRM) AddResources(_ context.Context, w *testapi.Widget, b *controller.Graph) error {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.passwords[string(w.UID)] == nil {
		rm.passwords[string(w.UID)] = []byte(rand.Text())
	}
	b.Add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-db-init"}, Data: map[string][]byte{"password": rm.passwords[string(w.UID)]}})
	return nil
}

// TestExplorer_ReportsAPlantedBug (issue 30, item 5): the explorer fails, at the crash point
// between the two writes and nowhere else, a component that reads its password back from the
// Secret it writes last; the same component reading it from the Secret it writes first passes
// every crash point. With a second crash (Crashes.Again: the recovering manager killed at its
// first write too) the first is reported with a third password. A component that keeps its
// password in memory fails the clean run already: the settle pass is a fresh manager, which does
// not have it (NewComponents).
func TestExplorer_ReportsAPlantedBug(t *testing.T) {
	const dataChanged = "Secret/w-db-init: data changed: 2 different contents, the clean run has 1"
	for _, tc := range []struct {
		name string
		// crashes is the exploration, Scenario and Report aside.
		crashes controllertest.Crashes
		// want is, per failed run, its write's resource ("" for the clean run) and a problem's
		// start; nil: no failure.
		want map[string]string
	}{
		{"password read back from the last Secret: crash after writing the first", controllertest.Crashes{
			Components: []controller.Component{controller.For("password", passwordRM{cl: api.Env(t).Client, from: "app"})},
		}, map[string]string{"/secrets/w-db-init": dataChanged}},
		{"password read back from the last Secret: crash after writing the first, three crash runs at once", controllertest.Crashes{
			Components: []controller.Component{controller.For("password", passwordRM{cl: api.Env(t).Client, from: "app"})},
			Parallel:   3,
		}, map[string]string{"/secrets/w-db-init": dataChanged}},
		{"password read back from the last Secret: crash before writing the second", controllertest.Crashes{
			Components: []controller.Component{controller.For("password", passwordRM{cl: api.Env(t).Client, from: "app"})},
			Mode:       controllertest.CrashBeforeWrite,
		}, map[string]string{"/secrets/w-app": dataChanged}},
		{"password read back from the first Secret", controllertest.Crashes{
			Components: []controller.Component{controller.For("password", passwordRM{cl: api.Env(t).Client, from: "db-init"})},
		}, nil},
		{"password read back from the last Secret, the recovering manager killed at its first write too", controllertest.Crashes{
			Components: []controller.Component{controller.For("password", passwordRM{cl: api.Env(t).Client, from: "app"})},
			Again:      1,
			// Each crash between the two writes generates another password.
		}, map[string]string{"/secrets/w-db-init": "Secret/w-db-init: data changed: 3 different contents, the clean run has 1"}},
		{"password in the component's memory", controllertest.Crashes{
			NewComponents: func() []controller.Component {
				return []controller.Component{controller.For("password", &memoRM{passwords: map[string][]byte{}})}
			},
			Points: []int{1},
		}, map[string]string{"": "not settled: a fresh manager's pass over the Ready owners wrote PATCH secrets/w-db-init", "/secrets/w-db-init": "not settled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var failures []controllertest.CrashFailure
			c := tc.crashes
			c.Scenario = func(t *testing.T, h *controllertest.Harness) {
				h.WaitReady(h.Create(controllertest.Named[testapi.Widget]("w")))
			}
			c.Report = func(f controllertest.CrashFailure) {
				mu.Lock()
				defer mu.Unlock()
				failures = append(failures, f)
			}
			report := controllertest.ExploreCrashes(t, api, c)
			if c.Points == nil && (report.Writes < 3 || report.Explored != report.Writes) {
				t.Errorf("%d crash points, %d explored; want every one of at least 3 (two Secrets, a status)", report.Writes, report.Explored)
			}
			if c.Again > 0 && report.Twice == 0 {
				t.Errorf("no recovering manager was killed (Again: %d)", c.Again)
			}
			got := map[string]string{}
			for _, f := range failures {
				t.Logf("reported: %s", f)
				for suffix, problem := range tc.want {
					first, _, _ := strings.Cut(f.Request, ", then ") // the crash point's write, without the recovery's
					if (suffix == "") == (f.Point == 0) && strings.HasSuffix(first, suffix) &&
						slices.ContainsFunc(f.Problems, func(p string) bool { return strings.HasPrefix(p, problem) }) {
						got[suffix] = problem
					}
				}
			}
			if len(failures) != len(tc.want) || len(got) != len(tc.want) {
				t.Errorf("%d runs failed (%d matched), want one per entry of %v", len(failures), len(got), tc.want)
			}
			crashFailures := len(tc.want)
			if _, clean := tc.want[""]; clean {
				crashFailures--
			}
			if report.Failed != crashFailures {
				t.Errorf("report counts %d failed crash points, want %d", report.Failed, crashFailures)
			}
		})
	}
}
