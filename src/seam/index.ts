// The seam's vocabulary: requests, results, stop reasons, runs, providers, capabilities, tools and
// their results, structured output, errors. Types and tiny pure helpers only; safe inside the
// workflow sandbox. It imports nothing else of the project, and everything else may import it.
export * from './budget';
export * from './constants';
export * from './content';
export * from './delegation';
export * from './errors';
export * from './json';
export type * from './provider';
export type * from './request';
export type * from './result';
export type * from './run';
export * from './structured';
export * from './tool';
