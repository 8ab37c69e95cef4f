// Types of agentbox-bwrap for `import`: the same declarations as index.d.cts.
export * from './index.cjs';
import * as agentbox from './index.cjs';
export default agentbox;
