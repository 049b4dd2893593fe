package kinds

// MPIJob is the MPI operator's kubeflow.org/v2beta1 MPIJob: the pod sets
// launcher (1 by default) and worker (0 by default) of
// spec.mpiReplicaSpecs, suspended by spec.runPolicy.suspend, finished
// when Succeeded or Failed, as the training operator's kinds are. The
// launcher runs as a batch/v1 Job that the MPIJob owns: it is part of
// the MPIJob and not queued on its own (Registry.Owner). On suspend the
// operator suspends the launcher Job and deletes the workers, and sets a
// Suspended condition.
var MPIJob = Kubeflow{Kind: "MPIJob", Plural: "mpijobs", Version: "v2beta1", Field: "mpiReplicaSpecs",
	Order: []string{"Launcher", "Worker"}, Replicas: map[string]int64{"Worker": 0}}
