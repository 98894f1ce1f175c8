package v1alpha1

// BeforeDelete hooks (controller.BeforeDelete): Jobs that an owner's teardown runs to completion
// before it deletes anything.
const (
	// AnnotationBeforeDelete on an owner set to BeforeDeleteSkip makes its teardown skip its
	// BeforeDelete hooks: the objects are deleted without running them (or without waiting any
	// longer for one that runs, failed or timed out; kdag leaves such a Job to the teardown like
	// any other object). Any other value is refused: the teardown is Stalled until the value is
	// corrected or removed, so that a typo never deletes data the hook was meant to save.
	AnnotationBeforeDelete = "kdag.dev/before-delete"
	// BeforeDeleteSkip is the value of AnnotationBeforeDelete that skips the hooks.
	BeforeDeleteSkip = "skip"

	// ConditionBeforeDelete is set on an owner being deleted whose graph holds BeforeDelete hooks:
	// False while a hook Job runs (reason BeforeDeleteRunning) or after one failed or timed out
	// (reason BeforeDeleteFailed, with Stalled=True), True once every hook completed (reason
	// BeforeDeleteCompleted) or the owner's AnnotationBeforeDelete skipped them (reason
	// BeforeDeleteSkipped). Once True, the hooks do not run again for this owner, even if a
	// hook's Job is gone.
	ConditionBeforeDelete = "BeforeDelete"

	// ReasonBeforeDeleteRunning: a BeforeDelete hook's Job runs; the teardown waits for it.
	ReasonBeforeDeleteRunning = "BeforeDeleteRunning"
	// ReasonBeforeDeleteFailed: a BeforeDelete hook's Job failed or did not complete within its
	// timeout; nothing is deleted until the Job completes, is deleted (to run it again), or the
	// owner is annotated to skip the hooks. Also the reason of the Warning event.
	ReasonBeforeDeleteFailed = "BeforeDeleteFailed"
	// ReasonBeforeDeleteCompleted: every BeforeDelete hook completed; the teardown goes on. Also
	// the reason of the Normal event.
	ReasonBeforeDeleteCompleted = "BeforeDeleteCompleted"
	// ReasonBeforeDeleteSkipped: the owner's AnnotationBeforeDelete skipped the hooks. Also the
	// reason of the Normal event.
	ReasonBeforeDeleteSkipped = "BeforeDeleteSkipped"
)
