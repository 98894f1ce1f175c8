// Command etcd is the etcd server at the version pinned in go.mod, built from source so that
// envtest and the local cluster need nothing but Go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
