// Command pause is the process that holds a Pod's sandbox (its namespaces) open, as
// registry.k8s.io/pause does: it sleeps until SIGINT or SIGTERM and, as the sandbox's PID 1
// when the Pod shares its process namespace, reaps the orphans it inherits. Built static by
// build.sh into a one-file image, so a real node needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child, so none stays a zombie.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
