package schemas

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// DefaultMinRefreshInterval is Options.MinRefreshInterval's default.
const DefaultMinRefreshInterval = 30 * time.Second

// Options configure a Provider.
type Options struct {
	// MinRefreshInterval is the least time between two checks, by Refresh, of whether the API
	// server publishes a newer schema for one GroupVersion. A check is one uncached read (GET
	// /openapi/v3); only a changed schema is fetched again. Default: DefaultMinRefreshInterval.
	// Negative: no limit, every Refresh checks.
	MinRefreshInterval time.Duration
	// Now tells the time, for tests. Default: time.Now.
	Now func() time.Time
}

// Provider hands out type converters built from the API server's OpenAPI v3 schemas, one per
// GroupVersion, fetched on first use and cached. It is safe for concurrent use. Create it with
// NewProvider or NewProviderForConfig.
type Provider struct {
	client openapi.ClientWithContext
	opts   Options

	mu  sync.Mutex
	gvs map[schema.GroupVersion]*entry
}

// entry is the state of one GroupVersion. Its fields are guarded by Provider.mu.
type entry struct {
	conv    *converter
	checked time.Time     // when conv was fetched or last found current
	loading chan struct{} // non-nil while a fetch runs; closed when it ends
}

// converter is a GroupVersion's type converter and the document it was built from.
type converter struct {
	tc managedfields.TypeConverter
	// url is the document's server-relative URL, which carries a hash of its content.
	url string
}

// NewProvider returns a Provider reading schemas through client (for example a discovery
// client's OpenAPIV3()).
func NewProvider(client openapi.Client, opts Options) *Provider {
	if opts.MinRefreshInterval == 0 {
		opts.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Provider{client: openapi.ToClientWithContext(client), opts: opts, gvs: map[schema.GroupVersion]*entry{}}
}

// NewProviderForConfig returns a Provider reading schemas from the API server of cfg through
// httpClient (a controller-runtime manager's GetConfig and GetHTTPClient, so that the requests
// share its transport). httpClient nil: one is built from cfg.
func NewProviderForConfig(cfg *rest.Config, httpClient *http.Client, opts Options) (*Provider, error) {
	var dc *discovery.DiscoveryClient
	var err error
	if httpClient == nil {
		dc, err = discovery.NewDiscoveryClientForConfig(cfg)
	} else {
		dc, err = discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	}
	if err != nil {
		return nil, errors.Wrapf(err, "schemas: discovery client for %s", cfg.Host)
	}
	return NewProvider(dc.OpenAPIV3(), opts), nil
}

// TypeConverter returns the type converter for objects of gv, fetching the GroupVersion's schema
// from the API server if no earlier call did. Concurrent callers for one GroupVersion wait for one
// fetch. A failed fetch is returned to the callers waiting for it and not remembered: the next
// call fetches again. It returns an error when the API server serves no schema for gv.
func (p *Provider) TypeConverter(ctx context.Context, gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	c, err := p.get(ctx, gv)
	if err != nil {
		return nil, err
	}
	return c.tc, nil
}

// Refresh checks whether the API server publishes a schema for gv other than the cached one and
// if so fetches it, so that the next TypeConverter returns the new one. It reports whether the
// converter changed. A check runs at most once per Options.MinRefreshInterval for a GroupVersion
// (and not at all before its first fetch): a call within that interval reports false and reads
// nothing. Use it when an object does not fit the cached schema, as after a CRD update.
func (p *Provider) Refresh(ctx context.Context, gv schema.GroupVersion) (bool, error) {
	p.mu.Lock()
	e := p.gvs[gv]
	var stale *converter
	if e != nil {
		stale = e.conv
	}
	p.mu.Unlock()
	if stale == nil {
		return false, nil
	}
	fresh, err := p.refresh(ctx, gv, stale)
	return fresh != stale, err
}

// Invalidate forgets the converter of gv: the next TypeConverter fetches the schema again. A fetch
// or refresh of gv under way is not affected.
func (p *Provider) Invalidate(gv schema.GroupVersion) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.gvs[gv]; e != nil && e.loading == nil {
		delete(p.gvs, gv)
	}
}

// WithContext returns a type converter for objects of any GroupVersion that fetches, with ctx, the
// schema of an object's GroupVersion on first use (see TypeConverter). When an object does not fit
// the cached schema (an unknown kind, an undeclared field), it refreshes the GroupVersion (see
// Refresh) and, if the schema changed, converts again; otherwise it returns the first error. Its
// errors name the GroupVersionKind and, for an object that does not fit, the structured-merge-diff
// validation errors, which may quote values of the object: do not show them to users unfiltered.
func (p *Provider) WithContext(ctx context.Context) managedfields.TypeConverter {
	return boundConverter{p: p, ctx: ctx}
}

type boundConverter struct {
	p   *Provider
	ctx context.Context // one caller's, see WithContext
}

var _ managedfields.TypeConverter = boundConverter{}

func (b boundConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	gv := gvk.GroupVersion()
	c, err := b.p.get(b.ctx, gv)
	if err != nil {
		return nil, err
	}
	tv, err := c.tc.ObjectToTyped(obj, opts...)
	if err == nil {
		return tv, nil
	}
	fresh, rerr := b.p.refresh(b.ctx, gv, c)
	if rerr != nil || fresh == c {
		return nil, errors.Wrapf(err, "%s", gvk)
	}
	tv, err = fresh.tc.ObjectToTyped(obj, opts...)
	return tv, errors.Wrapf(err, "%s", gvk)
}

// TypedToObject needs no schema: every converter turns a typed value into the same unstructured
// object.
func (boundConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return deduced.TypedToObject(v)
}

var deduced = managedfields.NewDeducedTypeConverter()

// get returns the cached converter of gv or fetches it, once for concurrent callers.
func (p *Provider) get(ctx context.Context, gv schema.GroupVersion) (*converter, error) {
	for {
		p.mu.Lock()
		e := p.gvs[gv]
		if e == nil {
			e = &entry{}
			p.gvs[gv] = e
		}
		if e.conv != nil {
			p.mu.Unlock()
			return e.conv, nil
		}
		if e.loading != nil {
			done := e.loading
			p.mu.Unlock()
			select {
			case <-done:
				continue // fetched, or failed: then this caller tries
			case <-ctx.Done():
				return nil, errors.Wrapf(context.Cause(ctx), "GroupVersion %s: wait for the OpenAPI schema", gv)
			}
		}
		done := make(chan struct{})
		e.loading = done
		p.mu.Unlock()

		c, err := p.fetch(ctx, gv, nil)

		p.mu.Lock()
		e.loading = nil
		if err == nil {
			e.conv, e.checked = c, p.opts.Now()
		}
		close(done)
		p.mu.Unlock()
		return c, err
	}
}

// refresh returns the converter of gv that replaces stale: the current one if another caller
// replaced stale already, a new one if the API server's document changed, else stale.
func (p *Provider) refresh(ctx context.Context, gv schema.GroupVersion, stale *converter) (*converter, error) {
	p.mu.Lock()
	e := p.gvs[gv]
	switch {
	case e == nil || e.conv == nil:
		// Invalidated, or being fetched anew: get takes care of it.
		p.mu.Unlock()
		return p.get(ctx, gv)
	case e.conv != stale:
		c := e.conv
		p.mu.Unlock()
		return c, nil
	case e.loading != nil:
		// Another caller is checking: use what it finds.
		done := e.loading
		p.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return stale, nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if e.conv == nil {
			return stale, nil
		}
		return e.conv, nil
	case p.opts.MinRefreshInterval > 0 && p.opts.Now().Sub(e.checked) < p.opts.MinRefreshInterval:
		p.mu.Unlock()
		return stale, nil
	}
	done := make(chan struct{})
	e.loading = done
	p.mu.Unlock()

	c, err := p.fetch(ctx, gv, stale)

	p.mu.Lock()
	defer p.mu.Unlock()
	e.loading = nil
	close(done)
	e.checked = p.opts.Now() // a failed check counts too: a broken server is not asked again at once
	if err != nil {
		return stale, err
	}
	e.conv = c
	return c, nil
}

// fetch reads the OpenAPI v3 document of gv and builds its converter. When the API server's
// document is the one current was built from (same URL, hence same hash), it returns current and
// reads only the index.
func (p *Provider) fetch(ctx context.Context, gv schema.GroupVersion, current *converter) (*converter, error) {
	paths, err := p.client.PathsWithContext(ctx)
	if err != nil {
		return nil, errors.Wrapf(err, "GroupVersion %s: list OpenAPI v3 documents", gv)
	}
	doc, ok := paths[apiPath(gv)]
	if !ok {
		return nil, errors.Errorf("GroupVersion %s: the API server publishes no OpenAPI v3 document for it", gv)
	}
	url := doc.ServerRelativeURL()
	if current != nil && current.url == url {
		return current, nil
	}
	raw, err := doc.SchemaWithContext(ctx, runtime.ContentTypeJSON)
	if err != nil {
		return nil, errors.Wrapf(err, "GroupVersion %s: fetch OpenAPI v3 document", gv)
	}
	var spec spec3.OpenAPI
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, errors.Wrapf(err, "GroupVersion %s: parse OpenAPI v3 document", gv)
	}
	if spec.Components == nil {
		return nil, errors.Errorf("GroupVersion %s: OpenAPI v3 document has no schemas", gv)
	}
	tc, err := managedfields.NewTypeConverter(spec.Components.Schemas, false)
	if err != nil {
		return nil, errors.Wrapf(err, "GroupVersion %s: build type converter", gv)
	}
	return &converter{tc: tc, url: url}, nil
}

// apiPath is the key of gv in the OpenAPI v3 index: api/v1, apis/apps/v1.
func apiPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}
