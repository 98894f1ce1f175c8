// Package controllertest is kdag's test kit for operator authors: what a test of a
// ResourceManager needs, so that a component's test reads like its scenario.
//
//   - Graph fakes what a StatusReporter reads of a reconcile's report, for unit tests of status
//     logic.
//
// It is a separate package so that production code never imports a test library.
package controllertest
