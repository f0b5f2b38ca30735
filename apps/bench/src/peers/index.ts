/** `--peers`: starts each named peer, measures it as Triad is measured, and stops it before the next. */
import { startBullmq } from './bullmq.js';
import { measurePeer, type PeerName, type PeerResult, type PeerRunOptions, type PeerSystem } from './peer.js';
import { startRestate } from './restate.js';

export { PEERS, type PeerName, type PeerResult } from './peer.js';

function start(name: PeerName, o: PeerRunOptions, redisPid: number | undefined): Promise<PeerSystem> {
  switch (name) {
    case 'bullmq':
      return startBullmq(o, redisPid);
    case 'restate':
      return startRestate(o, true);
    case 'restate-nofsync':
      return startRestate(o, false);
  }
}

export async function measurePeers(names: readonly PeerName[], o: PeerRunOptions, redisPid: number | undefined): Promise<PeerResult[]> {
  const out: PeerResult[] = [];
  for (const name of names) {
    o.progress(`${name}: starting`);
    const sys = await start(name, o, redisPid);
    try {
      out.push(await measurePeer(name, sys, o));
    } finally {
      await sys.stop();
    }
  }
  return out;
}
