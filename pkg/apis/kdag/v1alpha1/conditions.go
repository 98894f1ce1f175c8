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
	// ConditionDrifted is True when objects of a node whose drift policy is report (the owner's
	// kdag.dev/drift annotation, or the node's) were changed by another writer and kdag left them
	// so; its message lists them as "Kind namespace/name: field paths", never values.
	// It becomes False once no processed node reports drift, and is absent on owners that never
	// had any. It does not change Ready, which follows the live objects' readiness.
	ConditionDrifted = "Drifted"
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
	// ReasonDriftReported: the Drifted condition is True (objects changed by others, left so);
	// also the reason of the Warning event when the list of drifted objects or fields changes.
	ReasonDriftReported = "DriftReported"
	// ReasonNoDrift: the Drifted condition is False (no reported drift any more).
	ReasonNoDrift = "NoDrift"
	// ReasonInvalidDriftPolicy: the owner's kdag.dev/drift annotation has an unknown value; the
	// owner is Stalled until it is corrected.
	ReasonInvalidDriftPolicy = "InvalidDriftPolicy"
	// ReasonVolumeExpansionForbidden: a PersistentVolumeClaim's storage request must grow but its
	// StorageClass does not allow volume expansion (apply.VolumeExpansionError). The owner is
	// Stalled; kdag tries again periodically, as only an administrator's change of the class helps.
	ReasonVolumeExpansionForbidden = "VolumeExpansionForbidden"
)
