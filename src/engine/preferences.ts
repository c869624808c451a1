// How preference layers combine (the contract says it at GET /subscribers/{subscriberId}/preferences):
// the workflow's defaults, overlaid by the subscriber's global layer, overlaid by the subscriber's
// choice for that workflow. Each setting comes from the most specific layer that chose it: a channel
// turned off globally stays on for a workflow where the subscriber turned it on. Critical workflows
// skip all this.
import { CHANNELS, type Channel } from '../contract.js';
import type { Layer } from '../db/repos/preferences.js';
import type { StoredWorkflow } from '../db/repos/workflows.js';


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
  const enabled = workflowEnabled(global, own);
  const channels: Partial<Record<Channel, boolean>> = {};
  for (const channel of allChannels ? CHANNELS : workflowChannels(workflow)) channels[channel] = enabled && channelSetting(workflow, global, own, channel);
  return { enabled, channels };
}

/** Whether a send on `channel` may go out: always for critical workflows. */
export function allowsChannel(workflow: Pick<StoredWorkflow, 'critical' | 'preferenceSettings'>, global: Layer, own: Layer, channel: Channel): boolean {
  if (workflow.critical) return true;
  return workflowEnabled(global, own) && channelSetting(workflow, global, own, channel);
}

/** The workflow on or off: the subscriber's switch for it, else their global switch. */
function workflowEnabled(global: Layer, own: Layer): boolean {
  return own.enabled ?? global.enabled ?? true;
}

/** One channel's setting: the subscriber's choice for the workflow, else their global choice, else the workflow's default. */
function channelSetting(workflow: Pick<StoredWorkflow, 'preferenceSettings'>, global: Layer, own: Layer, channel: Channel): boolean {
  return own.channels[channel] ?? global.channels[channel] ?? workflow.preferenceSettings[channel];
}
