// Structured output: the schema subset a run may ask for, and the capture runtime next to the model.
export { assertSupportedOutputSchema, snapshotOutputSchema, validateStructuredValue } from './schema';
export { STRUCTURED_OUTPUT_DESCRIPTION, STRUCTURED_OUTPUT_INSTRUCTION, createStructuredOutputRuntime } from './runtime';
