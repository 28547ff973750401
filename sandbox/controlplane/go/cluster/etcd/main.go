// Command etcd runs the etcd server of the go.etcd.io/etcd/server/v3 module with its usual flags.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
