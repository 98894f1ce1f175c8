// Package operator runs a kdag operator: Options and Run set a controller-runtime manager up for
// a list of components (scheme, caches, RESTMapper, leader election, probes, metrics, tracing,
// shards, the start-up RBAC check) and run it; Main is a whole command (flags, --version, the
// `plan` subcommand, the logger, SIGTERM), so that an operator's main is a few lines, as in
// examples/hello:
//
//	func options() operator.Options {
//		scheme := runtime.NewScheme()
//		utilruntime.Must(clientgoscheme.AddToScheme(scheme))
//		utilruntime.Must(v1alpha1.AddToScheme(scheme))
//		return operator.Options{Name: "hello", Scheme: scheme}
//	}
//
//	func main() {
//		operator.Main([]controller.Component{controller.For("hello", ResourceManager{})}, options())
//	}
//
// Rules lists every RBAC rule such a manager needs (package rbac), to compare with its role;
// KdagRules is the part kdag itself needs on an owner type, whatever the graphs apply.
package operator
