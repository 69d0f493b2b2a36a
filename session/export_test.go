package session

// Names for the queue policy's tests.
type (
	AheadState = aheadState
)

const (
	AheadNone   = aheadNone
	AheadWanted = aheadWanted
	AheadDone   = aheadDone
)

var NextPrefill = nextPrefill
