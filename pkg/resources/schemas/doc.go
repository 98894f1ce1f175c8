// Package schemas gives server-side apply type converters (managedfields.TypeConverter, from
// k8s.io/apimachinery) built from the OpenAPI v3 schemas the API server publishes, so that a
// caller can compute the field set of an object exactly as the API server does (KEP-555: which
// lists are keyed by which fields, which are sets, which maps and lists are atomic, which key
// fields have defaults). It works for built-in kinds and custom resources alike, since the API
// server publishes both.
//
// It is the one part of kdag's resource handling that talks to the API server; the comparison
// that uses its converters (resources.MissingFields) stays pure.
//
// # Provider
//
// A Provider fetches the schema document of a GroupVersion (GET /openapi/v3, then the
// GroupVersion's document) the first time a converter for it is asked for, and keeps the
// converter for the life of the process: concurrent callers for one GroupVersion wait for a single
// fetch, and a failed fetch is not remembered. A GroupVersion's schema can change while the
// process runs (a CRD is updated); Refresh looks at the hash the API server publishes for the
// GroupVersion, at most once per Options.MinRefreshInterval, and fetches the document again only
// when it changed. WithContext returns a converter for objects of any GroupVersion that does this
// by itself when an object does not fit the cached schema (an unknown kind or field), and then
// tries once more.
//
// The Controller builds one Provider per manager with NewProviderForConfig(mgr.GetConfig(),
// mgr.GetHTTPClient(), Options{}) and hands Provider.WithContext(ctx) to
// resources.MissingFields.
//
// The same approach is kubectl's (k8s.io/client-go/openapi3) and controller-runtime's for
// server-side apply extraction; the converter itself is apimachinery's
// managedfields.NewTypeConverter.
package schemas
