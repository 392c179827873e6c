// The failure converter of encrypted namespaces: a failure's message and stack trace travel as a
// payload, so the codec encrypts them like everything else (the default stores them as text).
// Loaded by path (`DataConverter.failureConverterPath`) by the clients and the activity workers.
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });

/** The path to give `DataConverter.failureConverterPath`. */
export const ENCRYPTED_FAILURE_CONVERTER_PATH = require.resolve('./failure-converter');
