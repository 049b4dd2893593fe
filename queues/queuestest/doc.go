// Package queuestest writes config YAML for tests: the ResourceFlavor,
// ClusterQueue, LocalQueue and WorkloadPriorityClass documents that
// queues.Parse reads, as single documents (Flavor, ClusterQueue, Stream)
// or as a whole config built by a Config.
//
// It writes text only, so that the queues package's own tests can use it.
// It imports only the standard library; the tests of any tally package
// may import it, and no package that is not a test.
package queuestest
