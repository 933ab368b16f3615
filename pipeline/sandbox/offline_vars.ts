/**
 * Variables every container that runs repository code gets besides the build's own install steps
 * (test, trace and agent containers, and the build's collect-only run): none of them may reach a
 * model hub, so the libraries that download at import or in a test are told so, and fail at once
 * with their own offline error. Without them huggingface_hub retries each call with back-off:
 * 23 s a call in a container with no network, measured with transformers' AutoConfig. 14 test
 * modules of TransformerLens that load a model while collecting took its build's collect-only run
 * past its 300 s limit, and a suite of hub tests (nnsight: 92) spends most of its time waiting.
 * The error is the same `couldn't connect to 'https://huggingface.co'` either way. A unit's
 * `env.vars` may still set them otherwise.
 */
export const OFFLINE_VARS: Readonly<Record<string, string>> = {
  HF_HUB_OFFLINE: '1',
  HF_DATASETS_OFFLINE: '1',
  TRANSFORMERS_OFFLINE: '1',
};
