package controller_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/testapi"
)

// TestReconcile_LogsNoRequestBodies: with the manager's logger at its most verbose, a reconcile
// that creates a Secret with a generated password logs kdag's own lines but not the API request
// and response bodies client-go logs at V(8) through the context's logger, which hold the password.
func TestReconcile_LogsNoRequestBodies(t *testing.T) {
	f := newFixture(t, widgetRM{readyDeployment: true})
	f.widget("app", testapi.WidgetSpec{MaxReplicas: 1, Data: map[string]string{"k": "v"}})
	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
	ctx := log.IntoContext(context.Background(), logger)
	if _, err := f.Reconcile(ctx, controllertest.Named[testapi.Widget]("app")); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	password := string(f.get(&corev1.Secret{}, "app-secret").(*corev1.Secret).Data["password"])
	if password == "" {
		t.Fatal("the generated Secret has no password")
	}
	mu.Lock()
	defer mu.Unlock()
	reconciled := false
	for _, l := range lines {
		if strings.Contains(l, "Request Body") || strings.Contains(l, "Response Body") || strings.Contains(l, password) {
			t.Errorf("log line with an API body or the password: %.300s", l)
		}
		reconciled = reconciled || strings.Contains(l, `"reconciled"`)
	}
	if !reconciled {
		t.Errorf("no \"reconciled\" line among %d: the logger was not used", len(lines))
	}
	if !logger.V(controller.MaxLogVerbosity).Enabled() || controller.CapVerbosity(logger).V(controller.MaxLogVerbosity+1).Enabled() {
		t.Error("controller.CapVerbosity must keep V(controller.MaxLogVerbosity) and drop the levels above it")
	}
}
