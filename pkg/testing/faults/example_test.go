package faults_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/kdag-dev/kdag/pkg/testing/faults"
)

// Wrap a client's transport; in a test of a manager, pass inj.Wrap to rest.Config.Wrap.
func ExampleNew() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()

	inj := faults.New(faults.Share(0.2), faults.Seed(42), faults.Kinds(faults.InternalError, faults.Conflict))
	client := &http.Client{Transport: inj.Wrap(http.DefaultTransport)}
	get := func() int {
		resp, err := client.Get(srv.URL + "/api/v1/namespaces/default/configmaps/settings")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	failed := 0
	for range 100 {
		if get() != http.StatusOK {
			failed++
		}
	}
	inj.Disable() // afterwards: every request gets through
	fmt.Println("after Disable:", get())
	st := inj.Stats()
	fmt.Println("requests:", st.Requests, "failed:", failed == st.Total())
	// Output:
	// after Disable: 200
	// requests: 101 failed: true
}
