#include "tests/tap.h"

int
main(void)
{
	TAP_OK(0, "cli: not written yet");
	return tap_done();
}
