// How preference layers combine. A channel reaches a subscriber through a workflow only when every
// layer allows it: the subscriber's global layer, and the workflow layer, where the subscriber's
// own choice for that workflow overrides the workflow's defaults. Critical workflows skip all this.
import type { Schemas } from '../http/types.js';
import type { StoredWorkflow } from '../db/repos/workflows.js';

export type Channel = Schemas['ChannelType'];
export const CHANNELS: readonly Channel[] = ['in_app', 'email', 'sms', 'chat', 'push'];

/** What a subscriber chose in one layer; anything left out defers to the layer below. */
export interface Layer {
  enabled?: boolean;
  channels: Partial<Record<Channel, boolean>>;
}

export const EMPTY_LAYER: Layer = { channels: {} };

export interface Preference {
  enabled: boolean;
  channels: Partial<Record<Channel, boolean>>;
}

/** The channels a workflow's active steps send on, in step order. */
export function workflowChannels(workflow: StoredWorkflow): Channel[] {
  const used = workflow.steps
    .filter((step) => step.active !== false && (CHANNELS as readonly string[]).includes(step.type))
    .map((step) => step.type as Channel);
  return [...new Set(used)];
}

/** The global layer as it stands, every channel spelled out. */
export function globalPreference(global: Layer): Required<Preference> & { channels: Record<Channel, boolean> } {
  const channels = Object.fromEntries(CHANNELS.map((c) => [c, global.channels[c] ?? true])) as Record<Channel, boolean>;
  return { enabled: global.enabled ?? true, channels };
}

/** The settings in force for one workflow, for the channels it uses (or all five). */
export function effectivePreference(workflow: StoredWorkflow, global: Layer, own: Layer, allChannels = false): Preference {
  const enabled = (global.enabled ?? true) && (own.enabled ?? true);
  const channels: Partial<Record<Channel, boolean>> = {};
  for (const channel of allChannels ? CHANNELS : workflowChannels(workflow)) {
    const forWorkflow = own.channels[channel] ?? workflow.preferenceSettings[channel];
    channels[channel] = enabled && (global.channels[channel] ?? true) && forWorkflow;
  }
  return { enabled, channels };
}

/** Whether a send on `channel` may go out: always for critical workflows. */
export function allowsChannel(workflow: Pick<StoredWorkflow, 'critical' | 'preferenceSettings'>, global: Layer, own: Layer, channel: Channel): boolean {
  if (workflow.critical) return true;
  const enabled = (global.enabled ?? true) && (own.enabled ?? true);
  return enabled && (global.channels[channel] ?? true) && (own.channels[channel] ?? workflow.preferenceSettings[channel]);
}
