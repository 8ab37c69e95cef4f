/* agentbox-supervisor: the program libagentbox starts for each run and command; entry.c. */
#include "entry.h"

int
main(int argc, char **argv)
{
	return supervisor_main(argc, argv);
}
