package controllertest

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

func TestCrashPoints(t *testing.T) {
	for _, tc := range []struct {
		name           string
		writes, stride int
		points, want   []int
	}{
		{"every write", 4, 0, nil, []int{1, 2, 3, 4}},
		{"stride, the last one added", 10, 4, nil, []int{1, 5, 9, 10}},
		{"stride that lands on the last", 9, 4, nil, []int{1, 5, 9}},
		{"no write", 0, 1, nil, nil},
		{"points given: stride ignored, kept as given", 10, 4, []int{7, 3}, []int{7, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := crashPoints(tc.writes, tc.stride, tc.points); !slices.Equal(got, tc.want) {
				t.Errorf("crashPoints(%d, %d, %v) = %v, want %v", tc.writes, tc.stride, tc.points, got, tc.want)
			}
		})
	}
}

// object is an unstructured object of kind, name and uid, with fields set by path ("data",
// "metadata.annotations", ...).
func object(kind, name, uid string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion("v1")
	if kind == "Job" {
		u.SetAPIVersion("batch/v1")
	}
	u.SetKind(kind)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	for path, v := range fields {
		_ = unstructured.SetNestedField(u.Object, v, strings.Split(path, ".")...)
	}
	return u
}

func TestHistory_Stats(t *testing.T) {
	keep := map[string]any{kdagv1alpha1.AnnotationResourcePolicy: kdagv1alpha1.ResourcePolicyKeep}
	complete := []any{map[string]any{"type": "Complete", "status": "True"}}
	type event struct {
		obj     *unstructured.Unstructured
		deleted bool
	}
	for _, tc := range []struct {
		name   string
		events []event
		byTest types.UID // deleted by the test
		key    string
		want   objectStats
	}{
		{"a Secret rewritten with other data", []event{
			{obj: object("Secret", "s", "1", map[string]any{"data": map[string]any{"k": "YQ=="}})},
			{obj: object("Secret", "s", "1", map[string]any{"data": map[string]any{"k": "Yg=="}})},
		}, "", "Secret/s", objectStats{UIDs: 1, Data: 2}},
		{"a Secret seen twice with the same data", []event{
			{obj: object("Secret", "s", "1", map[string]any{"data": map[string]any{"k": "YQ=="}})},
			{obj: object("Secret", "s", "1", map[string]any{"data": map[string]any{"k": "YQ=="}})},
		}, "", "Secret/s", objectStats{UIDs: 1, Data: 1}},
		{"deleted and created again", []event{
			{obj: object("ConfigMap", "c", "1", nil)},
			{obj: object("ConfigMap", "c", "1", nil), deleted: true},
			{obj: object("ConfigMap", "c", "2", map[string]any{"metadata.generation": int64(1)})},
		}, "", "ConfigMap/c", objectStats{UIDs: 2, Generation: 1}},
		{"a kept object deleted", []event{
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.annotations": keep})},
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.annotations": keep, "metadata.deletionTimestamp": "2026-01-01T00:00:00Z"})},
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.annotations": keep}), deleted: true},
		}, "", "ConfigMap/c", objectStats{UIDs: 1, KeptDeleted: 1}},
		{"a kept object deleted, the last version seen kept", []event{
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.annotations": keep})},
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.annotations": keep}), deleted: true},
		}, "", "ConfigMap/c", objectStats{UIDs: 1, KeptDeleted: 1}},
		{"kept, released (a deletionPolicy switched to Delete), then deleted", []event{
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.annotations": keep})},
			{obj: object("ConfigMap", "c", "1", nil)},
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.deletionTimestamp": "2026-01-01T00:00:00Z"})},
			{obj: object("ConfigMap", "c", "1", nil), deleted: true},
		}, "", "ConfigMap/c", objectStats{UIDs: 1}},
		{"a kept object deleted by the test", []event{
			{obj: object("ConfigMap", "c", "1", map[string]any{"metadata.annotations": keep})},
			{obj: object("ConfigMap", "c", "1", nil), deleted: true},
		}, "1", "ConfigMap/c", objectStats{UIDs: 1}},
		{"a Job created again after it completed", []event{
			{obj: object("Job", "j", "1", nil)},
			{obj: object("Job", "j", "1", map[string]any{"status.conditions": complete})},
			{obj: object("Job", "j", "1", nil), deleted: true},
			{obj: object("Job", "j", "2", nil)},
		}, "", "Job/j", objectStats{UIDs: 2, Reruns: 1}},
		{"a Job created again before it completed", []event{
			{obj: object("Job", "j", "1", nil)},
			{obj: object("Job", "j", "1", nil), deleted: true},
			{obj: object("Job", "j", "2", nil)},
		}, "", "Job/j", objectStats{UIDs: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHistory(func(uid types.UID) bool { return uid == tc.byTest })
			for _, ev := range tc.events {
				hs.observe(ev.obj, ev.deleted)
			}
			stats, errs := hs.stats()
			if got := stats[tc.key]; got != tc.want || len(errs) > 0 {
				t.Errorf("stats[%s] = %+v (errors %v), want %+v", tc.key, got, errs, tc.want)
			}
		})
	}
}

func TestCompareStats(t *testing.T) {
	base := map[string]objectStats{
		"Secret/s":                  {UIDs: 1, Data: 1},
		"StatefulSet/db":            {UIDs: 1, Generation: 1},
		"Job/migrate":               {UIDs: 1, Generation: 1},
		"ConfigMap/recreated-twice": {UIDs: 2, Generation: 1},
	}
	for _, tc := range []struct {
		name  string
		got   map[string]objectStats
		allow []string
		want  []string // problems' prefixes
	}{
		{"as the clean run", base, nil, nil},
		{"less than the clean run", map[string]objectStats{"ConfigMap/recreated-twice": {UIDs: 1, Generation: 1}}, nil, nil},
		{"a Secret regenerated", map[string]objectStats{"Secret/s": {UIDs: 2, Data: 2}}, nil,
			[]string{"Secret/s: data changed", "Secret/s: deleted and created again"}},
		{"a StatefulSet re-created, allowed", map[string]objectStats{"StatefulSet/db": {UIDs: 2, Generation: 1}}, []string{"StatefulSet/db"}, nil},
		{"a StatefulSet re-created, not allowed", map[string]objectStats{"StatefulSet/db": {UIDs: 2, Generation: 1}}, nil,
			[]string{"StatefulSet/db: deleted and created again"}},
		{"a spec rewritten", map[string]objectStats{"StatefulSet/db": {UIDs: 1, Generation: 2}}, nil,
			[]string{"StatefulSet/db: spec written more often"}},
		{"a Job run again", map[string]objectStats{"Job/migrate": {UIDs: 2, Generation: 1, Reruns: 1}}, []string{"Job/migrate"},
			[]string{"Job/migrate: created again after it completed"}},
		{"an object the clean run did not have, created twice", map[string]objectStats{"Secret/new": {UIDs: 2, Data: 1}}, nil,
			[]string{"Secret/new: deleted and created again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compareStats(base, tc.got, tc.allow)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d starting %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem %d = %q, want it to start %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestCrashSwitch checks what reaches the API server around a crash point: the writes before
// it, the write itself only after a crash after it, nothing after it except with a conflict.
func TestCrashSwitch(t *testing.T) {
	for _, tc := range []struct {
		mode      CrashMode
		wantSent  []string // the requests that reached the server
		wantCodes []int    // per request: the status code, 0 for an error
	}{
		{CrashAfterWrite, []string{"GET /api/v1/namespaces/n/secrets/a", "PATCH /api/v1/namespaces/n/secrets/a", "POST /api/v1/namespaces/n/events",
			"PATCH /api/v1/namespaces/n/secrets/b"}, []int{200, 200, 200, 0, 0, 0}},
		{CrashBeforeWrite, []string{"GET /api/v1/namespaces/n/secrets/a", "PATCH /api/v1/namespaces/n/secrets/a", "POST /api/v1/namespaces/n/events"},
			[]int{200, 200, 200, 0, 0, 0}},
		{ConflictAtWrite, []string{"GET /api/v1/namespaces/n/secrets/a", "PATCH /api/v1/namespaces/n/secrets/a", "POST /api/v1/namespaces/n/events",
			"GET /api/v1/namespaces/n/secrets/b", "PATCH /api/v1/namespaces/n/secrets/c"}, []int{200, 200, 200, 409, 200, 200}},
	} {
		t.Run(tc.mode.point(2), func(t *testing.T) {
			var mu sync.Mutex
			var sent []string
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, r.Method+" "+r.URL.Path)
			}))
			defer server.Close()
			transport := &http.Transport{}
			defer transport.CloseIdleConnections()
			var killed atomic.Bool
			sw := &crashSwitch{mode: tc.mode}
			// Two managers through one switch (two shards): the crash point kills the one that
			// made the write, the other goes on.
			first, other := sw.target(), sw.target()
			first.kill = func() { killed.Store(true) }
			sw.arm(2)
			rt := first.wrap(transport)
			var codes []int
			for _, r := range []string{"GET /api/v1/namespaces/n/secrets/a", "PATCH /api/v1/namespaces/n/secrets/a", "POST /api/v1/namespaces/n/events",
				"PATCH /api/v1/namespaces/n/secrets/b", "GET /api/v1/namespaces/n/secrets/b", "PATCH /api/v1/namespaces/n/secrets/c"} {
				method, path, _ := strings.Cut(r, " ")
				req, err := http.NewRequest(method, server.URL+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := rt.RoundTrip(req)
				code := 0
				if err == nil {
					code = resp.StatusCode
					_ = resp.Body.Close()
				}
				codes = append(codes, code)
			}
			req, err := http.NewRequest(http.MethodPatch, server.URL+"/api/v1/namespaces/n/secrets/other", nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := other.wrap(transport).RoundTrip(req); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("the other manager's write after the crash point: %v, want it sent", err)
			} else {
				_ = resp.Body.Close()
			}
			// The first manager's writes up to the crash point (all 3 with a conflict, which kills
			// nothing), events aside, and the other's.
			if n, want := sw.count(), map[bool]int{true: 4, false: 3}[tc.mode == ConflictAtWrite]; n != want {
				t.Errorf("%d writes counted, want %d", n, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if last := sent[len(sent)-1]; last != "PATCH /api/v1/namespaces/n/secrets/other" {
				t.Errorf("last request sent %q, want the other manager's write", last)
			}
			sent = sent[:len(sent)-1]
			if !slices.Equal(sent, tc.wantSent) || !slices.Equal(codes, tc.wantCodes) {
				t.Errorf("sent %q with codes %v\nwant %q with %v", sent, codes, tc.wantSent, tc.wantCodes)
			}
			if want := tc.mode != ConflictAtWrite; killed.Load() != want || sw.request() != "PATCH /api/v1/namespaces/n/secrets/b" {
				t.Errorf("killed %v at %q, want %v at the second write", killed.Load(), sw.request(), want)
			}
		})
	}
}
