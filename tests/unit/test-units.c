#include "tests/tap.h"

int
main(void)
{
	TAP_OK(0, "units: not written yet");
	return tap_done();
}
