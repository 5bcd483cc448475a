# CPU model of kernels/conv1d_bwd_weight_dense_tf32.cu (the window-staged TF32 grad-weight), written in session 28
# (a helper's review, then extended): make_plan, the block decomposition (n tile fastest, then m tile, group, split),
# the stage loads (dy by 16-byte units, 4-byte copies, or the CONVKIT_F32_WGRAD_DY_ALIGN=1 lead + realignment; x by
# the 16-byte path with its lead or the element path with its stepped phase offsets), tap_off, the rounding pass's
# grad-bias sums, the mma m16n8k8 fragments as the PTX ISA lays them out, the masking of positions past the output,
# and the split partials, in fp64 without the TF32 rounding. Shared memory starts as NaN, so any unloaded value that
# reached a written output shows. Checks: dw and db against a direct sum (error < 1e-9), every partial written once,
# stepped offsets equal to (t % S) * wq + t / S, sources inside the tensors. The pipeline runs in program order (no
# cp.async timing): the group accounting was checked by hand. Run: python3 ci/emulate_tf32_wgrad.py [INDEX ...]
# (a few seconds for all cases). It checks the index math as ported by hand, not the CUDA: keep it in step with the .cu.
import sys

import numpy as np

kBM,kBJ,kDyPitch=128,32,36
def cdiv(a,b): return -(-a//b)
def rup(v,m): return cdiv(v,m)*m
def plan(B,Cin,Cout,L,K,S,D,P,PR,G,xalign=True,yalign=True,dy_lead=False,limit=232448,num_sms=132,nsplit_force=None):
    q={}
    cin_g=Cin//G; cout_g=Cout//G
    q.update(k=K,s=S,d=D,cin_g=cin_g,cout_g=cout_g,red=cin_g*K)
    cn_max=8*(16//K)
    q['n_tiles']=cdiv(cin_g,cn_max); q['cn']=rup(cdiv(cin_g,q['n_tiles']),8); q['n8']=K*q['cn']//8
    one=31*S+(K-1)*D+1; per_tap=31*S+1
    q['nseg']=K if (K>1 and K*per_tap<one) else 1
    wlen=one if q['nseg']==1 else per_tap
    assert wlen<=8192
    q['wlen']=wlen
    q['vec']=int(S==1 and xalign); q['dy_vec']=int(yalign and not dy_lead); q['dy_lead']=int(dy_lead)
    q['wq']=rup(wlen+3,4) if q['vec'] else rup((wlen+S-1)//S,4)
    span=q['nseg']*S*q['wq']
    xp=rup(span-4,32)+4
    if xp<span: xp+=32
    q['xp']=xp
    q['slot_floats']=kBM*kDyPitch+q['cn']*xp
    sb=q['slot_floats']*4
    if 2*(3*sb+2048)<=limit+1024:
        q['bps']=2; q['ns']=4 if 2*(4*sb+2048)<=limit+1024 else 3
    else:
        q['bps']=1; q['ns']=min(4,(limit-64)//sb); assert q['ns']>=2
    Lout=(L+P+PR-(K-1)*D-1)//S+1
    q['Lout']=Lout
    q['m_tiles']=cdiv(cout_g,kBM); q['cpr']=cdiv(Lout,kBJ); q['total_chunks']=B*q['cpr']
    pairs=G*q['m_tiles']*q['n_tiles']
    cap=max(1,(64<<20)//(Cout*q['red']+Cout))
    want=cdiv(num_sms*q['bps']*4,pairs)
    splits=min(want,q['total_chunks'],cap); splits=max(splits,1)
    if nsplit_force: splits=nsplit_force
    q['per_split']=cdiv(q['total_chunks'],splits); q['splits']=cdiv(q['total_chunks'],q['per_split'])
    return q

def lead(q,P,sg):
    if not q['vec']: return 0
    o=(sg*q['d']-P)%4
    return o

def run(B,Cin,Cout,L,K,S,D,P,PR,G,inf_tail=False,**kw):
    rng=np.random.default_rng(0)
    q=plan(B,Cin,Cout,L,K,S,D,P,PR,G,**kw)
    Lout=q['Lout']
    x=rng.standard_normal((B,Cin,L)); dy=rng.standard_normal((B,Cout,Lout))
    if inf_tail:  # x positions no valid output reads: set to inf
        used=np.zeros(L+P+PR+K*D+S*64,bool)
        for j in range(Lout):
            for k in range(K): used[j*S+k*D]=True
        for t in range(L):
            if not used[t+P]: x[:,:,t]=np.inf
        print('inf positions', int((~used[P:P+L]).sum()))
    xf=x.ravel(); dyf=dy.ravel()
    xsb,xsc,xsl=Cin*L,L,1; ysb,ysc,ysl=Cout*Lout,Lout,1
    splits=q['splits']; n_w=Cout*q['red']
    part=np.full(splits*n_w+splits*Cout,np.nan)
    writes=np.zeros(part.shape,int)
    ns=q['ns']; SF=q['slot_floats']; cn=q['cn']; xp=q['xp']; wq=q['wq']; nseg=q['nseg']
    grid=G*q['m_tiles']*q['n_tiles']*splits
    for bid in range(grid):
        rest,nt=divmod(bid,q['n_tiles']); rest,mt=divmod(rest,q['m_tiles']); split,g=divmod(rest,G)
        co0=mt*kBM; c0=nt*cn; ch_begin=split*q['per_split']
        total=min(q['total_chunks']-ch_begin,q['per_split'])
        with_bias=(nt==0)
        smem=np.full(ns*SF,np.nan)
        tap_off=[]
        for tid in range(K):
            t=tid*D if nseg==1 else 0; sg=0 if nseg==1 else tid
            tap_off.append(sg*S*wq+lead(q,P,sg)+(t%S)*wq+t//S)
        dyg=(g*q['cout_g']+co0)*ysc; xg=(g*q['cin_g']+c0)*xsc
        dy_rows=min(q['cout_g']-co0,kBM); x_rows=min(q['cin_g']-c0,cn)*nseg
        lb,ljc=divmod(ch_begin,q['cpr']); mstate={'mjc':ljc,'mb':lb}
        state={'lb':lb,'ljc':ljc}
        def load(slot):
            Ds=slot*SF; Xs=Ds+kBM*kDyPitch
            j0=state['ljc']*kBJ; lb=state['lb']
            dyb=dyg+lb*ysb+j0*ysl
            if q['dy_vec'] and j0+kBJ<=Lout:
                for r in range(dy_rows):
                    for e in range(8):
                        smem[Ds+r*kDyPitch+4*e:Ds+r*kDyPitch+4*e+4]=dyf[dyb+r*ysc+4*e:dyb+r*ysc+4*e+4]
            elif q['dy_lead']:
                for u in range(dy_rows*9):
                    r=u//9; e=u-r*9
                    rowp=dyg+lb*ysb+r*ysc
                    ld=rowp&3
                    pos=j0-ld+4*e
                    d=Ds+r*kDyPitch+4*e
                    assert 4*e+4<=kDyPitch
                    if pos>=0 and pos+4<=Lout:
                        assert (rowp+pos)%4==0
                        smem[d:d+4]=dyf[rowp+pos:rowp+pos+4]
                    elif pos>=Lout or pos+4<=0:
                        smem[d:d+4]=0.0
                    else:
                        for f in range(4):
                            ok=0<=pos+f<Lout
                            smem[d+f]=dyf[rowp+pos+f] if ok else 0.0
            else:
                for r in range(dy_rows):
                    for e in range(32):
                        ok=j0+e<Lout
                        smem[Ds+r*kDyPitch+e]=dyf[dyb+r*ysc+e*ysl] if ok else 0.0
            for r in range(x_rows):
                c=r//nseg; sg=r-c*nseg
                row=xg+lb*xsb+c*xsc
                p0=j0*S-P+sg*D
                dst=Xs+c*xp+sg*S*wq
                if q['vec']:
                    ld=lead(q,P,sg); a0=p0-ld; assert a0%4==0
                    units=(ld+q['wlen']+3)>>2
                    assert 4*units<=wq
                    for u in range(units):
                        pos=a0+4*u
                        for e in range(4):
                            ok=0<=pos+e<L
                            smem[dst+4*u+e]=xf[row+pos+e] if ok else 0.0
                else:
                    lo=-p0; hi=L-p0
                    t_lo=min(max(lo,0),q['wlen']); t_hi=min(max(hi,0),q['wlen'])
                    n_in=max(t_hi-t_lo,0)
                    for lane in range(32):
                        q0=lane//S; r0=lane-q0*S; dq=32//S; dr=32-dq*S
                        sp=row+(p0+lane)*xsl; sstep=32*xsl
                        off=r0*wq+q0; rt=r0; step=dq+dr*wq; wrap=1-S*wq
                        t=lane
                        while t<q['wlen']:
                            assert off==(t%S)*wq+t//S, (off,t)
                            assert 0<=off<S*wq
                            ok=0<=(t-t_lo)<n_in
                            if ok: assert 0<=sp-row<L
                            smem[dst+off]=xf[sp] if ok else 0.0
                            sp+=sstep; off+=step; rt+=dr
                            if rt>=S: rt-=S; off+=wrap
                            t+=32
            assert Xs+cn*xp<=(slot+1)*SF
        def advance():
            state['ljc']+=1
            if state['ljc']==q['cpr']: state['ljc']=0; state['lb']+=1
        bsum=np.zeros(256)
        acc=np.zeros((8,32,64))
        # sequential emulation of pipeline with slot assignment
        for s in range(ns-1):
            if s<total: load(s); advance()
        per_tap=cn//8
        def lane_tiles():  # (warp, lane, jn, tap, first channel of the n8 tile) of every live n8 tile a lane holds
            for w in range(8):
                for lane in range(32):
                    for jn in range(4):
                        t=jn*4+(w>>1)  # dealt round to the warp columns
                        if t<q['n8']: yield w,lane,jn,t//per_tap,(t%per_tap)*8
        xoff=np.full((8,32,4),-1)
        for w,lane,jn,k,cb in lane_tiles():
            xoff[w,lane,jn]=(cb+(lane>>2))*xp+tap_off[k]+(lane&3)
        for gs in range(total):
            if gs+ns-1<total: load((gs+ns-1)%ns); advance()
            slot=gs%ns
            base=slot*SF
            # round stage: bias
            if q['dy_lead']:
                vals={}
                for tid in range(256):
                    r=tid>>1; h=tid&1
                    rowp=dyg+mstate['mb']*ysb+r*ysc; ld=rowp&3
                    vals[tid]=smem[base+r*kDyPitch+ld+h*16:base+r*kDyPitch+ld+h*16+16].copy()
                for tid in range(256):
                    r=tid>>1; h=tid&1
                    smem[base+r*kDyPitch+h*16:base+r*kDyPitch+h*16+16]=vals[tid]
            for tid in range(256):
                r=tid>>1; h=tid&1
                v=smem[base+r*kDyPitch+h*16:base+r*kDyPitch+h*16+16]
                if with_bias:
                    for i in range(4): bsum[tid]+= (v[4*i]+v[4*i+1])+(v[4*i+2]+v[4*i+3])
            Ds=base; Xs=base+kBM*kDyPitch
            left=Lout-mstate['mjc']*32; valid=min(left,32)
            mstate['mjc']+=1
            if mstate['mjc']==q['cpr']: mstate['mjc']=0; mstate['mb']+=1
            for w in range(8):
                wm,wn=w&1,w>>1
                lanes=np.arange(32); gq=lanes>>2; tq=lanes&3
                for ks in range(4):
                    for i in range(4):
                        ap=Ds+(wm*64+i*16+gq)*kDyPitch+ks*8+tq
                        A=np.zeros((16,8))
                        A[gq,tq]=smem[ap]; A[gq+8,tq]=smem[ap+8*kDyPitch]
                        A[gq,tq+4]=smem[ap+4]; A[gq+8,tq+4]=smem[ap+8*kDyPitch+4]
                        for jn in range(4):
                            if xoff[w,0,jn]<0: continue
                            Bm=np.zeros((8,8))
                            # (positions past the output: the kernel's zero B operand)
                            Bm[tq,gq]=np.where(ks*8+tq<valid, smem[Xs+xoff[w,:,jn]+ks*8], 0.0)
                            Bm[tq+4,gq]=np.where(ks*8+tq+4<valid, smem[Xs+xoff[w,:,jn]+ks*8+4], 0.0)
                            with np.errstate(invalid='ignore'):
                                C=A@Bm
                            idx=(i*4+jn)*4
                            acc[w,lanes,idx+0]+=C[gq,2*tq]; acc[w,lanes,idx+1]+=C[gq,2*tq+1]
                            acc[w,lanes,idx+2]+=C[gq+8,2*tq]; acc[w,lanes,idx+3]+=C[gq+8,2*tq+1]
        if with_bias:
            for tid in range(0,256,2):
                v=bsum[tid]+bsum[tid+1]; co=co0+(tid>>1)
                if co<q['cout_g']:
                    ix=splits*n_w+split*Cout+g*q['cout_g']+co; part[ix]=v; writes[ix]+=1
        dst=split*n_w+g*q['cout_g']*q['red']
        for w,lane,jn,k,cb in lane_tiles():
            gq,tq=lane>>2,lane&3
            for i in range(4):
                for f in range(4):
                    co=co0+(w&1)*64+i*16+gq+8*(f>>1); ci=c0+cb+2*tq+(f&1)
                    if co<q['cout_g'] and ci<q['cin_g']:
                        ix=dst+co*q['red']+ci*K+k; part[ix]=acc[w,lane,(i*4+jn)*4+f]; writes[ix]+=1
    assert (writes==1).all(), ("writes", np.unique(writes,return_counts=True))
    dw=part[:splits*n_w].reshape(splits,n_w).sum(0).reshape(Cout,q['cin_g'],K)
    db=part[splits*n_w:].reshape(splits,Cout).sum(0)
    # reference
    cin_g,cout_g=q['cin_g'],q['cout_g']
    xpad=np.zeros((B,Cin,L+P+PR+ (K-1)*D+S*40)); xpad[:,:,P:P+L]=x
    ref=np.zeros((Cout,cin_g,K))
    for gg in range(G):
        for k in range(K):
            xs=xpad[:,gg*cin_g:(gg+1)*cin_g, k*D: k*D+S*(Lout-1)+1:S]  # B,cin_g,Lout
            ref[gg*cout_g:(gg+1)*cout_g,:,k]=np.einsum('boj,bcj->oc',dy[:,gg*cout_g:(gg+1)*cout_g],xs)
    rb=dy.sum((0,2))
    e1=np.abs(dw-ref).max(); e2=np.abs(db-rb).max()
    shape=dict(B=B,Cin=Cin,Cout=Cout,L=L,K=K,S=S,D=D,P=P,G=G,vec=q['vec'],dyv=q['dy_vec'],lead=q['dy_lead'],nseg=nseg,
               ns=ns,splits=splits,n_tiles=q['n_tiles'],cn=cn,Lout=Lout)
    print(shape, "err", e1, e2, "OK" if (e1<1e-9 and e2<1e-9) else "FAIL")
    return bool(e1<1e-9 and e2<1e-9)


# B, Cin, Cout, L, K, S, D, P (left), PR (right), G; xalign / yalign: rows 16-byte aligned; dy_lead: the DY_ALIGN path;
# inf_tail: Inf in x where no output reads; nsplit_force: splits (chunks across batch rows)
CASES = [
    dict(B=2, Cin=8, Cout=16, L=200, K=3, S=3, D=4, P=2, PR=1, G=1),
    dict(B=1, Cin=8, Cout=8, L=1300, K=2, S=1, D=600, P=3, PR=0, G=1),
    dict(B=1, Cin=8, Cout=8, L=1300, K=2, S=1, D=600, P=3, PR=0, G=1, xalign=False),
    dict(B=2, Cin=16, Cout=24, L=150, K=5, S=2, D=1, P=2, PR=2, G=2),
    dict(B=1, Cin=100, Cout=8, L=70, K=3, S=1, D=1, P=1, PR=1, G=1),
    dict(B=1, Cin=100, Cout=8, L=70, K=3, S=1, D=1, P=1, PR=1, G=1, xalign=False, yalign=False),
    dict(B=1, Cin=8, Cout=200, L=50, K=1, S=1, D=1, P=0, PR=0, G=1),
    dict(B=3, Cin=6, Cout=10, L=97, K=4, S=1, D=3, P=5, PR=0, G=2, nsplit_force=2),
    dict(B=1, Cin=4, Cout=4, L=400, K=3, S=37, D=2, P=1, PR=1, G=1),
    dict(B=1, Cin=4, Cout=4, L=3000, K=3, S=2, D=1000, P=7, PR=3, G=1),
    dict(B=2, Cin=6, Cout=6, L=90, K=16, S=1, D=1, P=30, PR=30, G=3),
    dict(B=2, Cin=9, Cout=6, L=90, K=7, S=3, D=2, P=3, PR=0, G=1),
    dict(B=1, Cin=8, Cout=8, L=12, K=2, S=2, D=3, P=0, PR=0, G=1, inf_tail=True),
    dict(B=2, Cin=8, Cout=16, L=200, K=3, S=3, D=4, P=2, PR=1, G=1, inf_tail=True),
    dict(B=1, Cin=8, Cout=8, L=77, K=2, S=1, D=40, P=0, PR=0, G=1, inf_tail=True),
    dict(B=2, Cin=9, Cout=6, L=90, K=7, S=3, D=2, P=3, PR=0, G=1, inf_tail=True),
    dict(B=1, Cin=4, Cout=4, L=3000, K=3, S=2, D=1000, P=7, PR=3, G=1, inf_tail=True),
    dict(B=2, Cin=8, Cout=16, L=200, K=3, S=3, D=4, P=2, PR=1, G=1, dy_lead=True),
    dict(B=3, Cin=8, Cout=13, L=101, K=2, S=1, D=1, P=0, PR=0, G=1, dy_lead=True),
    dict(B=3, Cin=8, Cout=13, L=102, K=2, S=1, D=1, P=0, PR=0, G=1, dy_lead=True, nsplit_force=4),
    dict(B=2, Cin=16, Cout=24, L=150, K=5, S=2, D=1, P=2, PR=2, G=2, dy_lead=True),
    dict(B=1, Cin=100, Cout=7, L=70, K=3, S=1, D=1, P=1, PR=1, G=1, dy_lead=True, xalign=False),
    dict(B=3, Cin=6, Cout=10, L=97, K=4, S=1, D=3, P=5, PR=0, G=2, nsplit_force=2, dy_lead=True),
    dict(B=1, Cin=8, Cout=8, L=12, K=2, S=2, D=3, P=0, PR=0, G=1, inf_tail=True, dy_lead=True),
    dict(B=2, Cin=9, Cout=6, L=90, K=7, S=3, D=2, P=3, PR=0, G=1, inf_tail=True, dy_lead=True),
    dict(B=2, Cin=4, Cout=130, L=67, K=3, S=1, D=1, P=1, PR=0, G=1, dy_lead=True),
]


if __name__ == "__main__":
    picked = [int(a) for a in sys.argv[1:]] or range(len(CASES))
    results = [run(**CASES[i]) for i in picked]
    print(f"{sum(results)} of {len(results)} cases passed")
    sys.exit(0 if all(results) else 1)
