// agentbox-bwrap for `import`: the same module as index.cjs (one implementation, one state).
import cjs from './index.cjs';

export const {
  run, binaryInfo, findBinary, Result, AgentboxError, AgentboxNotFoundError,
  IncompatibleAgentboxError, SetupError, UsageError, AbortError, RunFailedError, VERSION,
  SCHEMA_VERSIONS, SPEC_VERSIONS, BINARY_ENV, STATUSES, LIMIT_NAMES, PROTECTION_NAMES,
  FILE_ORIGINS, NETWORK_MODES, Session, Cell, SessionEndedError, CellFailedError, CELL_SCHEMAS,
  CELL_STATUSES,
} = cjs;
export default cjs;
