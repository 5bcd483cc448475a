# CPU model of csrc/kernels/conv1d_fwd_dense_tma.cu (session 15, written without a GPU): the tile plan
# (plan_window, tap_row), the TMA loads of issue() (element stride S, zeros outside [0, L) and past Cin/groups),
# the packed weights (pack_weights_kernel) and the wgmma operand addressing of the no-swizzle K-major descriptors
# (A row R, k: rg 2*st + k/8, row R, k%8; B: row (cg0 + k/8) * cgs + tap_row + n, k%8), checked against a direct
# conv1d on integer data (exact). It checks the index math as ported by hand, not the PTX: keep it in step with
# the .cu. Run: python3 ci/emulate_dense_tma.py  (about a minute)
import numpy as np, math, sys
def cdiv(a,b): return -(-a//b)
def plan(B,Cin,Cout,K,L,S,D,P,G,Lout,mw,nb,cc):
    q=dict(k=K,s=S,d=D,mw=mw,nb=nb,cc=cc,bm=128*mw,bn=128*nb)
    wq_contig=(K-1)*D//S+q['bn']; rows_contig=S*wq_contig; rows_seg=K*q['bn']
    if K>1 and rows_seg<rows_contig: q.update(nseg=K,nph=1); wq_min=q['bn']
    else: q.update(nseg=1,nph=S); wq_min=wq_contig
    max_rows=(256//S)&~7
    q['npieces']=cdiv(wq_min,max_rows); q['piece_rows']=cdiv(cdiv(wq_min,q['npieces']),8)*8
    q['wq']=q['npieces']*q['piece_rows']; q['cgs']=q['nseg']*q['nph']*q['wq']
    q['cin_g']=Cin//G; q['cout_g']=Cout//G
    q['chunks']=cdiv(q['cin_g'],cc); q['m_tiles']=cdiv(q['cout_g'],q['bm']); q['j_tiles']=cdiv(Lout,q['bn'])
    return q
def tap_row(q,k):
    if q['nseg']>1: return k*q['wq']
    o=k*q['d']; return (o%q['s'])*q['wq']+o//q['s']
def run(B,Cin,Cout,K,L,S,D,P,PR,G,mw,nb,cc,seed=0):
    rng=np.random.default_rng(seed)
    Lout=(L+P+PR-D*(K-1)-1)//S+1
    x=rng.integers(-4,5,(B,Cin,L)).astype(np.float64)
    w=rng.integers(-3,4,(Cout,Cin//G,K)).astype(np.float64)
    q=plan(B,Cin,Cout,K,L,S,D,P,G,Lout,mw,nb,cc)
    cin_g,cout_g,bm,bn=q['cin_g'],q['cout_g'],q['bm'],q['bn']
    xcl=np.transpose(x,(0,2,1))  # (B, L, C)
    # packed weights [g][mt][chunk][rg][row][8]
    rgn=K*cc//8
    pack=np.zeros((G,q['m_tiles'],q['chunks'],rgn,bm,8))
    for g in range(G):
     for mt in range(q['m_tiles']):
      for ch in range(q['chunks']):
       for rg in range(rgn):
        k=rg//(cc//8); c8=rg%(cc//8)
        for e in range(8):
          ci=ch*cc+c8*8+e
          if ci>=cin_g: continue
          rows=np.arange(bm); co=mt*bm+rows; ok=co<cout_g
          pack[g,mt,ch,rg,rows[ok],e]=w[g*cout_g+co[ok],ci,k]
    y=np.zeros((B,Cout,Lout))
    for b in range(B):
     for jt in range(q['j_tiles']):
      for g in range(G):
       for mt in range(q['m_tiles']):
        acc=np.zeros((bm,bn))
        start0=jt*bn*S-P
        for ch in range(q['chunks']):
          A=pack[g,mt,ch]  # [rg][row][8]
          xs=np.zeros((cc//8*q['cgs'],8))
          # issue(): TMA loads
          for cg in range(cc//8):
           for seg in range(q['nseg']):
            for ph in range(q['nph']):
             for pc in range(q['npieces']):
              dst=cg*q['cgs']+(seg*q['nph']+ph)*q['wq']+pc*q['piece_rows']
              pos=start0+seg*D+ph+pc*q['piece_rows']*S
              cgg=ch*(cc//8)+cg
              for i in range(q['piece_rows']):
                t=pos+i*S
                if 0<=t<L and cgg<cin_g//8:
                  xs[dst+i]=xcl[b,t,g*cin_g+cgg*8:g*cin_g+cgg*8+8]
          steps=K*cc//16; cps=cc//16
          for st in range(steps):
            k=st//cps; cg0=(st%cps)*2
            Am=np.concatenate([A[2*st],A[2*st+1]],axis=1)  # [row][16]: kk<8 from rg 2st, else 2st+1
            r0=tap_row(q,k)
            Bm=np.zeros((16,bn))
            for half in range(2):
              base=(cg0+half)*q['cgs']+r0
              Bm[half*8:half*8+8,:]=xs[base:base+bn].T
            acc+=Am@Bm
        co0=mt*bm; j0=jt*bn
        nco=min(bm,cout_g-co0); nj=min(bn,Lout-j0)
        y[b,g*cout_g+co0:g*cout_g+co0+nco,j0:j0+nj]=acc[:nco,:nj]
    # reference
    ref=np.zeros_like(y)
    xp=np.zeros((B,Cin,L+P+PR+S*bn)); xp[:,:,P:P+L]=x
    for co in range(Cout):
      g=co//cout_g
      for k in range(K):
        seg=xp[:,g*cin_g:(g+1)*cin_g, k*D: k*D+S*(Lout-1)+1:S]
        ref[:,co,:]+=np.einsum('bcl,c->bl',seg,w[co,:,k])
    err=np.abs(y-ref).max()
    print(f"B{B} Cin{Cin} Cout{Cout} K{K} L{L} S{S} D{D} P{P}/{PR} G{G} mw{mw} nb{nb} cc{cc} nseg{q['nseg']} nph{q['nph']} wq{q['wq']} pieces{q['npieces']}x{q['piece_rows']} err {err} {'OK' if err==0 else 'FAIL'}")
    return err==0
ok=True
cases=[(2,72,96,3,1001,1,1,1,1,3,1,2,16),(1,64,200,5,700,3,4,7,2,1,2,1,16),(1,32,64,4,1500,8,1,3,3,1,1,1,16),
       (1,48,144,3,1500,2,300,5,5,1,2,1,16),(3,32,48,3,70,1,1,1,1,1,1,1,16),(2,16,64,2,300,1,1,0,1,1,1,2,16),
       (1,64,64,3,999,2,1,0,0,1,1,1,32),(1,64,128,3,2000,1,512,0,0,1,1,1,32),(1,96,40,7,600,5,2,3,3,2,1,2,16)]
for c in cases: ok&=run(*c)
print("ALL OK" if ok else "SOME FAIL")
sys.exit(0 if ok else 1)
