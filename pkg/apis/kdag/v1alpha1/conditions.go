package v1alpha1

// Condition types kdag sets on an owner. They follow the kstatus conventions
// (sigs.k8s.io/cli-utils/pkg/kstatus): Reconciling=True or Stalled=True make an owner InProgress
// or Failed; Ready=True with observedGeneration == generation makes it Current, so
// `kubectl wait --for=condition=Ready` and Flux or Argo CD health checks work.
const (
	// ConditionReady is True when every node of the graph is applied and ready.
	ConditionReady = "Ready"
	// ConditionReconciling is True while nodes are being applied or wait for readiness.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the reconcile cannot progress without a change to the owner
	// (a terminal error); its message says what to change.
	ConditionStalled = "Stalled"
)

// Condition reasons kdag writes (in Ready, Reconciling and Stalled) and the reasons of its
// events. They are stable: the same situation gives the same reason and message, so writing the
// status does not start another reconcile.
const (
	ReasonReady         = "Ready"
	ReasonWaiting       = "WaitingForNodes"
	ReasonNodeFailed    = "NodeFailed"
	ReasonInvalid       = "Invalid"
	ReasonBuildFailed   = "BuildFailed"
	ReasonObjectInvalid = "ObjectInvalid"
	// ReasonValidationFailed: the Validator returned a transient error; the reconcile is retried.
	ReasonValidationFailed = "ValidationFailed"
	// ReasonObjectFailed: a node's object failed for good and said no reason of its own (see
	// ObjectFailedError, which otherwise carries the object's reason).
	ReasonObjectFailed = "ObjectFailed"
	// ReasonDataKeyMissing: a generated key that opens existing data is gone (DataKeyMissingError).
	ReasonDataKeyMissing = "DataKeyMissing"
	// ReasonPruneFailed: deleting an object that left the graph failed; the owner is not Ready
	// and the reconcile is retried with backoff. Also the reason of the Warning event.
	ReasonPruneFailed   = "PruneFailed"
	ReasonTearingDown   = "TearingDown"
	ReasonCleanupFailed = "CleanupFailed"
	// ReasonStatusWriteFailed: writing the owner's status failed, so the status cannot say so;
	// the reason of the Warning event that does.
	ReasonStatusWriteFailed = "StatusWriteFailed"
	// ReasonDriftConflict: another field manager keeps changing fields kdag owns; kdag paused
	// reverting them (Options.DriftRepairLimit). Also the reason of the Warning event.
	ReasonDriftConflict = "DriftConflict"
)
