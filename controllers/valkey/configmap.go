package valkey

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

// defaults are the settings of a cache that may lose its content: no persistence, evict the
// least recently used keys when full.
var defaults = map[string]string{
	"appendonly":       "no",
	"save":             `""`,
	"maxmemory-policy": "allkeys-lru",
	"dir":              "/data",
}

// configMap renders valkey.conf from the defaults and spec.config, sorted for a stable hash.
func configMap(v *giteav1alpha1.Valkey) *corev1.ConfigMap {
	settings := maps.Clone(defaults)
	for k, val := range v.Spec.Config {
		settings[k] = string(val)
	}
	settings["port"] = fmt.Sprint(Port)
	var conf strings.Builder
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(&conf, "%s %s\n", k, settings[k])
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: v.Name + "-config", Labels: labels(v)},
		Data:       map[string]string{"valkey.conf": conf.String()},
	}
}
