// Package controllers wires the reference operator's components into a manager. Each component
// is a package with one kdag ResourceManager; adding one is a line in Components.
package controllers

import (
	"github.com/kdag-dev/kdag/controllers/gitea"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// Components lists the reference operator's controllers, each with opts (and, for the
// controllers named in concurrency, its number of owners reconciled at once).
func Components(concurrency map[string]int, opts ...controller.Options) []controller.Component {
	with := func(name string) []controller.Options {
		o := append([]controller.Options(nil), opts...)
		if n := concurrency[name]; n > 0 {
			o = append(o, controller.Options{MaxConcurrentReconciles: n})
		}
		return o
	}
	return []controller.Component{
		controller.For("gitea", gitea.ResourceManager{}, append(with("gitea"), gitea.ChildReadiness())...),
		controller.For("postgresql", postgresql.ResourceManager{}, with("postgresql")...),
		controller.For("valkey", valkey.ResourceManager{}, with("valkey")...),
		controller.For("giteaserver", giteaserver.ResourceManager{}, with("giteaserver")...),
	}
}
