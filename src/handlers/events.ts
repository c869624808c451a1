import { notYet } from './not-yet.js';

export const triggerEvent = notYet('triggerEvent');
export const triggerEventBulk = notYet('triggerEventBulk');
export const cancelEvent = notYet('cancelEvent');
