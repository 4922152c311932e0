package trigger

import "github.com/valetkit/valet/clock"

// Clock is an alias of clock.Clock, the time a scheduler reads and waits
// on; it is kept so that code naming trigger.Clock still compiles. New
// code names clock.Clock.
type Clock = clock.Clock

// Timer is an alias of clock.Timer, a single wake-up from a Clock.
type Timer = clock.Timer

// SystemClock is an alias of clock.System, the machine's clock. The zero
// value is ready to use.
type SystemClock = clock.System
