// Package crd embeds the CRDs that `make manifests` generates into bases/, so that programs
// (the offline `plan` command) can default objects exactly as the API server would.
package crd

import "embed"

// Bases holds bases/*.yaml.
//
//go:embed bases/*.yaml
var Bases embed.FS
