/**
 * A send that cannot happen as things stand (no address, no integration, a template over its
 * budget): retrying will not help, so its job fails at once with the message as its detail.
 */
export class Undeliverable extends Error {}
