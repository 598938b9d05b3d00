/*
 * pmhist.c - native-histogram arithmetic for the PromQL functions and
 * operators (pmeval_int.h): add, sub, scale, counter-reset detection,
 * quantile, fraction and bucket bounds, as Prometheus 2.42's
 * model/histogram FloatHistogram computes them.
 *
 * Our histograms hold their buckets dense (pmodel.h): one array per side
 * starting at a Prometheus bucket index, zeros included, where Prometheus
 * keeps spans and leaves empty buckets out. The arithmetic gives the same
 * numbers either way (an absent bucket adds or subtracts 0). Where
 * Prometheus's answer depends on whether an empty bucket is stored (the
 * quantile iteration stops on the first bucket reaching the rank, which for
 * q = 0 could be an empty one), we skip empty buckets, which is what
 * Prometheus sees once a histogram has been compacted (every rate() result
 * is). Results come back with leading and trailing empty buckets trimmed.
 *
 * Threads: pure over the arguments; results in the caller's arena.
 */
#include "query/pmeval_int.h"
#include "query/pmfn_int.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Bucket bounds in [0.5, 1) for schemas 0..8, entry (1 << s) - 1 + i for
 * schema s, index i: the decimal constants of Prometheus's
 * model/histogram/generic.go exponentialBounds (Apache-2.0), kept as they
 * are because they are not all the correctly rounded 2^(i/2^s - 1), and the
 * bounds must be bit-identical to Prometheus's. */
static const double frac_bounds[511] = {
    0.5,
    0.5,
    0.7071067811865475,
    0.5,
    0.5946035575013605,
    0.7071067811865475,
    0.8408964152537144,
    0.5,
    0.5452538663326288,
    0.5946035575013605,
    0.6484197773255048,
    0.7071067811865475,
    0.7711054127039704,
    0.8408964152537144,
    0.9170040432046711,
    0.5,
    0.5221368912137069,
    0.5452538663326288,
    0.5693943173783458,
    0.5946035575013605,
    0.620928906036742,
    0.6484197773255048,
    0.6771277734684463,
    0.7071067811865475,
    0.7384130729697496,
    0.7711054127039704,
    0.805245165974627,
    0.8408964152537144,
    0.8781260801866495,
    0.9170040432046711,
    0.9576032806985735,
    0.5,
    0.5109485743270583,
    0.5221368912137069,
    0.5335702003384117,
    0.5452538663326288,
    0.5571933712979462,
    0.5693943173783458,
    0.5818624293887887,
    0.5946035575013605,
    0.6076236799902344,
    0.620928906036742,
    0.6345254785958666,
    0.6484197773255048,
    0.6626183215798706,
    0.6771277734684463,
    0.6919549409819159,
    0.7071067811865475,
    0.7225904034885232,
    0.7384130729697496,
    0.7545822137967112,
    0.7711054127039704,
    0.7879904225539431,
    0.805245165974627,
    0.8228777390769823,
    0.8408964152537144,
    0.8593096490612387,
    0.8781260801866495,
    0.8973545375015533,
    0.9170040432046711,
    0.9370838170551498,
    0.9576032806985735,
    0.9785720620876999,
    0.5,
    0.5054446430258502,
    0.5109485743270583,
    0.5165124395106142,
    0.5221368912137069,
    0.5278225891802786,
    0.5335702003384117,
    0.5393803988785598,
    0.5452538663326288,
    0.5511912916539204,
    0.5571933712979462,
    0.5632608093041209,
    0.5693943173783458,
    0.5755946149764913,
    0.5818624293887887,
    0.5881984958251406,
    0.5946035575013605,
    0.6010783657263515,
    0.6076236799902344,
    0.6142402680534349,
    0.620928906036742,
    0.6276903785123455,
    0.6345254785958666,
    0.6414350080393891,
    0.6484197773255048,
    0.6554806057623822,
    0.6626183215798706,
    0.6698337620266515,
    0.6771277734684463,
    0.6845012114872953,
    0.6919549409819159,
    0.6994898362691555,
    0.7071067811865475,
    0.7148066691959849,
    0.7225904034885232,
    0.7304588970903234,
    0.7384130729697496,
    0.7464538641456323,
    0.7545822137967112,
    0.762799075372269,
    0.7711054127039704,
    0.7795022001189185,
    0.7879904225539431,
    0.7965710756711334,
    0.805245165974627,
    0.8140137109286738,
    0.8228777390769823,
    0.8318382901633681,
    0.8408964152537144,
    0.8500531768592616,
    0.8593096490612387,
    0.8686669176368529,
    0.8781260801866495,
    0.8876882462632604,
    0.8973545375015533,
    0.9071260877501991,
    0.9170040432046711,
    0.9269895625416926,
    0.9370838170551498,
    0.9472879907934827,
    0.9576032806985735,
    0.9680308967461471,
    0.9785720620876999,
    0.9892280131939752,
    0.5,
    0.5027149505564014,
    0.5054446430258502,
    0.5081891574554764,
    0.5109485743270583,
    0.5137229745593818,
    0.5165124395106142,
    0.5193170509806894,
    0.5221368912137069,
    0.5249720429003435,
    0.5278225891802786,
    0.5306886136446309,
    0.5335702003384117,
    0.5364674337629877,
    0.5393803988785598,
    0.5423091811066545,
    0.5452538663326288,
    0.5482145409081883,
    0.5511912916539204,
    0.5541842058618393,
    0.5571933712979462,
    0.5602188762048033,
    0.5632608093041209,
    0.5663192597993595,
    0.5693943173783458,
    0.572486072215902,
    0.5755946149764913,
    0.5787200368168754,
    0.5818624293887887,
    0.585021884841625,
    0.5881984958251406,
    0.5913923554921704,
    0.5946035575013605,
    0.5978321960199137,
    0.6010783657263515,
    0.6043421618132907,
    0.6076236799902344,
    0.6109230164863786,
    0.6142402680534349,
    0.6175755319684665,
    0.620928906036742,
    0.6243004885946023,
    0.6276903785123455,
    0.6310986751971253,
    0.6345254785958666,
    0.637970889198196,
    0.6414350080393891,
    0.6449179367033329,
    0.6484197773255048,
    0.6519406325959679,
    0.6554806057623822,
    0.659039800633032,
    0.6626183215798706,
    0.6662162735415805,
    0.6698337620266515,
    0.6734708931164728,
    0.6771277734684463,
    0.6808045103191123,
    0.6845012114872953,
    0.688217985377265,
    0.6919549409819159,
    0.6957121878859629,
    0.6994898362691555,
    0.7032879969095076,
    0.7071067811865475,
    0.7109463010845827,
    0.7148066691959849,
    0.718687998724491,
    0.7225904034885232,
    0.7265139979245261,
    0.7304588970903234,
    0.7344252166684908,
    0.7384130729697496,
    0.7424225829363761,
    0.7464538641456323,
    0.7505070348132126,
    0.7545822137967112,
    0.7586795205991071,
    0.762799075372269,
    0.7669409989204777,
    0.7711054127039704,
    0.7752924388424999,
    0.7795022001189185,
    0.7837348199827764,
    0.7879904225539431,
    0.7922691326262467,
    0.7965710756711334,
    0.8008963778413465,
    0.805245165974627,
    0.8096175675974316,
    0.8140137109286738,
    0.8184337248834821,
    0.8228777390769823,
    0.8273458838280969,
    0.8318382901633681,
    0.8363550898207981,
    0.8408964152537144,
    0.8454623996346523,
    0.8500531768592616,
    0.8546688815502312,
    0.8593096490612387,
    0.8639756154809185,
    0.8686669176368529,
    0.8733836930995842,
    0.8781260801866495,
    0.8828942179666361,
    0.8876882462632604,
    0.8925083056594671,
    0.8973545375015533,
    0.9022270839033115,
    0.9071260877501991,
    0.9120516927035263,
    0.9170040432046711,
    0.9219832844793128,
    0.9269895625416926,
    0.9320230241988943,
    0.9370838170551498,
    0.9421720895161669,
    0.9472879907934827,
    0.9524316709088368,
    0.9576032806985735,
    0.9628029718180622,
    0.9680308967461471,
    0.9732872087896164,
    0.9785720620876999,
    0.9838856116165875,
    0.9892280131939752,
    0.9945994234836328,
    0.5,
    0.5013556375251013,
    0.5027149505564014,
    0.5040779490592088,
    0.5054446430258502,
    0.5068150424757447,
    0.5081891574554764,
    0.509566998038869,
    0.5109485743270583,
    0.5123338964485679,
    0.5137229745593818,
    0.5151158188430205,
    0.5165124395106142,
    0.5179128468009786,
    0.5193170509806894,
    0.520725062344158,
    0.5221368912137069,
    0.5235525479396449,
    0.5249720429003435,
    0.526395386502313,
    0.5278225891802786,
    0.5292536613972564,
    0.5306886136446309,
    0.5321274564422321,
    0.5335702003384117,
    0.5350168559101208,
    0.5364674337629877,
    0.5379219445313954,
    0.5393803988785598,
    0.5408428074966075,
    0.5423091811066545,
    0.5437795304588847,
    0.5452538663326288,
    0.5467321995364429,
    0.5482145409081883,
    0.549700901315111,
    0.5511912916539204,
    0.5526857228508706,
    0.5541842058618393,
    0.5556867516724088,
    0.5571933712979462,
    0.5587040757836845,
    0.5602188762048033,
    0.5617377836665098,
    0.5632608093041209,
    0.564787964283144,
    0.5663192597993595,
    0.5678547070789026,
    0.5693943173783458,
    0.5709381019847808,
    0.572486072215902,
    0.5740382394200894,
    0.5755946149764913,
    0.5771552102951081,
    0.5787200368168754,
    0.5802891060137493,
    0.5818624293887887,
    0.5834400184762408,
    0.585021884841625,
    0.5866080400818185,
    0.5881984958251406,
    0.5897932637314379,
    0.5913923554921704,
    0.5929957828304968,
    0.5946035575013605,
    0.5962156912915756,
    0.5978321960199137,
    0.5994530835371903,
    0.6010783657263515,
    0.6027080545025619,
    0.6043421618132907,
    0.6059806996384005,
    0.6076236799902344,
    0.6092711149137041,
    0.6109230164863786,
    0.6125793968185725,
    0.6142402680534349,
    0.6159056423670379,
    0.6175755319684665,
    0.6192499490999082,
    0.620928906036742,
    0.622612415087629,
    0.6243004885946023,
    0.6259931389331581,
    0.6276903785123455,
    0.6293922197748583,
    0.6310986751971253,
    0.6328097572894031,
    0.6345254785958666,
    0.6362458516947014,
    0.637970889198196,
    0.6397006037528346,
    0.6414350080393891,
    0.6431741147730128,
    0.6449179367033329,
    0.6466664866145447,
    0.6484197773255048,
    0.6501778216898253,
    0.6519406325959679,
    0.6537082229673385,
    0.6554806057623822,
    0.6572577939746774,
    0.659039800633032,
    0.6608266388015788,
    0.6626183215798706,
    0.6644148621029772,
    0.6662162735415805,
    0.6680225691020727,
    0.6698337620266515,
    0.6716498655934177,
    0.6734708931164728,
    0.6752968579460171,
    0.6771277734684463,
    0.6789636531064505,
    0.6808045103191123,
    0.6826503586020058,
    0.6845012114872953,
    0.6863570825438342,
    0.688217985377265,
    0.690083933630119,
    0.6919549409819159,
    0.6938310211492645,
    0.6957121878859629,
    0.6975984549830999,
    0.6994898362691555,
    0.7013863456101023,
    0.7032879969095076,
    0.7051948041086352,
    0.7071067811865475,
    0.7090239421602076,
    0.7109463010845827,
    0.7128738720527471,
    0.7148066691959849,
    0.7167447066838943,
    0.718687998724491,
    0.7206365595643126,
    0.7225904034885232,
    0.7245495448210174,
    0.7265139979245261,
    0.7284837772007218,
    0.7304588970903234,
    0.7324393720732029,
    0.7344252166684908,
    0.7364164454346837,
    0.7384130729697496,
    0.7404151139112358,
    0.7424225829363761,
    0.7444354947621984,
    0.7464538641456323,
    0.7484777058836176,
    0.7505070348132126,
    0.7525418658117031,
    0.7545822137967112,
    0.7566280937263048,
    0.7586795205991071,
    0.7607365094544071,
    0.762799075372269,
    0.7648672334736434,
    0.7669409989204777,
    0.7690203869158282,
    0.7711054127039704,
    0.7731960915705107,
    0.7752924388424999,
    0.7773944698885442,
    0.7795022001189185,
    0.7816156449856788,
    0.7837348199827764,
    0.7858597406461707,
    0.7879904225539431,
    0.7901268813264122,
    0.7922691326262467,
    0.7944171921585818,
    0.7965710756711334,
    0.7987307989543135,
    0.8008963778413465,
    0.8030678282083853,
    0.805245165974627,
    0.8074284071024302,
    0.8096175675974316,
    0.8118126635086642,
    0.8140137109286738,
    0.8162207259936375,
    0.8184337248834821,
    0.820652723822003,
    0.8228777390769823,
    0.8251087869603088,
    0.8273458838280969,
    0.8295890460808079,
    0.8318382901633681,
    0.8340936325652911,
    0.8363550898207981,
    0.8386226785089391,
    0.8408964152537144,
    0.8431763167241966,
    0.8454623996346523,
    0.8477546807446661,
    0.8500531768592616,
    0.8523579048290255,
    0.8546688815502312,
    0.8569861239649629,
    0.8593096490612387,
    0.8616394738731368,
    0.8639756154809185,
    0.8663180910111553,
    0.8686669176368529,
    0.871022112577578,
    0.8733836930995842,
    0.8757516765159389,
    0.8781260801866495,
    0.8805069215187917,
    0.8828942179666361,
    0.8852879870317771,
    0.8876882462632604,
    0.890095013257712,
    0.8925083056594671,
    0.8949281411607002,
    0.8973545375015533,
    0.8997875124702672,
    0.9022270839033115,
    0.9046732696855155,
    0.9071260877501991,
    0.909585556079304,
    0.9120516927035263,
    0.9145245157024483,
    0.9170040432046711,
    0.9194902933879467,
    0.9219832844793128,
    0.9244830347552253,
    0.9269895625416926,
    0.92950288621441,
    0.9320230241988943,
    0.9345499949706191,
    0.9370838170551498,
    0.93962450902828,
    0.9421720895161669,
    0.9447265771954693,
    0.9472879907934827,
    0.9498563490882775,
    0.9524316709088368,
    0.9550139751351947,
    0.9576032806985735,
    0.9601996065815236,
    0.9628029718180622,
    0.9654133954938133,
    0.9680308967461471,
    0.9706554947643201,
    0.9732872087896164,
    0.9759260581154889,
    0.9785720620876999,
    0.9812252401044634,
    0.9838856116165875,
    0.9865531961276168,
    0.9892280131939752,
    0.9919100824251095,
    0.9945994234836328,
    0.9972960560854698,
};

/* Upper bound of bucket |idx| at |schema| (Prometheus getBound): exact
 * powers of two built with ldexp, the last finite bucket ending at
 * DBL_MAX so that the one above it (for ±Inf observations) ends at +Inf. */
static double get_bound(int32_t idx, int32_t schema)
{
    if (schema < 0) {
        int64_t exp = (int64_t)idx * ((int64_t)1 << -schema);
        if (exp == 1024) {
            return DBL_MAX;
        }
        if (exp > 2000) {
            return INFINITY;
        }
        if (exp < -2000) {
            return 0;
        }
        return ldexp(1, (int)exp);
    }
    int32_t frac_idx = (int32_t)((uint32_t)idx & ((1u << schema) - 1));
    double frac = frac_bounds[(1 << schema) - 1 + frac_idx];
    int32_t exp = (idx >> schema) + 1; /* arithmetic shift, as Go's >> */
    if (frac == 0.5 && exp == 1025) {
        return DBL_MAX;
    }
    return ldexp(frac, exp);
}

void pm_hist_bounds(int32_t schema, int32_t i, bool negative, double *lower, double *upper)
{
    if (negative) {
        *lower = -get_bound(i, schema);
        *upper = -get_bound(i - 1, schema);
    } else {
        *lower = get_bound(i - 1, schema);
        *upper = get_bound(i, schema);
    }
}

/* Index of bucket |idx| of schema |from| in the coarser schema |to|. */
static int32_t target_idx(int32_t idx, int32_t from, int32_t to)
{
    if (from == to) {
        return idx;
    }
    return ((idx - 1) >> (from - to)) + 1;
}

/* One side of a histogram walked at a target schema <= its own, merging
 * the buckets that fall into one target bucket, and leaving out target
 * buckets whose upper bound is <= abs_start (Prometheus's
 * floatBucketIterator). */
struct bit {
    const double *v;
    int32_t off;
    uint32_t n, i;
    int32_t schema, ts;
    double abs_start;
    int32_t idx;  /* current target index */
    double count; /* current merged count */
};

static void bit_init(struct bit *it, const struct pm_hist *h, bool positive, double abs_start,
                     int32_t ts)
{
    it->v = positive ? h->pos : h->neg;
    it->off = positive ? h->pos_offset : h->neg_offset;
    it->n = positive ? h->n_pos : h->n_neg;
    it->i = 0;
    it->schema = h->schema;
    it->ts = ts;
    it->abs_start = abs_start;
    it->idx = 0;
    it->count = 0;
}

static bool bit_next(struct bit *it)
{
    while (it->i < it->n) {
        int32_t t = target_idx(it->off + (int32_t)it->i, it->schema, it->ts);
        double c = 0;
        while (it->i < it->n && target_idx(it->off + (int32_t)it->i, it->schema, it->ts) == t) {
            c += it->v[it->i];
            it->i++;
        }
        if (get_bound(t, it->ts) <= it->abs_start) {
            continue;
        }
        it->idx = t;
        it->count = c;
        return true;
    }
    return false;
}

/* A side being built: dense counts for indexes [off, off + n). */
struct side {
    double *v;
    int32_t off;
    uint32_t n;
};

/* Makes room for index |idx| (zero-filled): 0 or -ENOMEM. */
static int side_reach(arena *a, struct side *s, int32_t idx)
{
    if (s->n != 0 && idx >= s->off && idx < s->off + (int32_t)s->n) {
        return 0;
    }
    int32_t lo = s->n == 0 ? idx : (idx < s->off ? idx : s->off);
    int32_t hi =
        s->n == 0 ? idx : (idx >= s->off + (int32_t)s->n ? idx : s->off + (int32_t)s->n - 1);
    uint32_t n = (uint32_t)(hi - lo + 1);
    double *v = (double *)arena_alloc(a, n * sizeof *v);
    if (v == NULL) {
        return -ENOMEM;
    }
    memset(v, 0, n * sizeof *v);
    if (s->n != 0) {
        memcpy(v + (s->off - lo), s->v, s->n * sizeof *v);
    }
    s->v = v;
    s->off = lo;
    s->n = n;
    return 0;
}

/* Drops leading and trailing empty buckets (Compact). */
static void side_trim(struct side *s)
{
    while (s->n != 0 && s->v[0] == 0) {
        s->v++;
        s->off++;
        s->n--;
    }
    while (s->n != 0 && s->v[s->n - 1] == 0) {
        s->n--;
    }
    if (s->n == 0) {
        s->v = NULL;
        s->off = 0;
    }
}

static void side_get(const struct pm_hist *h, bool positive, struct side *s)
{
    s->v = positive ? h->pos : h->neg;
    s->off = positive ? h->pos_offset : h->neg_offset;
    s->n = positive ? h->n_pos : h->n_neg;
}

static void side_put(struct pm_hist *h, bool positive, const struct side *s)
{
    if (positive) {
        h->pos = s->v;
        h->pos_offset = s->off;
        h->n_pos = s->n;
    } else {
        h->neg = s->v;
        h->neg_offset = s->off;
        h->n_neg = s->n;
    }
}

/* Adds |sign| times |other|'s buckets (walked at h's schema, leaving out
 * those inside h's zero bucket) into h's side; h's arrays are its own.
 * Two passes: the index range first, so the side grows once. 0 or
 * -ENOMEM. */
static int merge_side(arena *a, struct pm_hist *h, const struct pm_hist *other, bool positive,
                      double sign)
{
    struct side s;
    side_get(h, positive, &s);
    struct bit it;
    bit_init(&it, other, positive, h->zero_threshold, h->schema);
    bool any = false;
    int32_t lo = 0, hi = 0;
    while (bit_next(&it)) {
        if (!any) {
            lo = it.idx;
            any = true;
        }
        hi = it.idx;
    }
    if (!any) {
        return 0;
    }
    if (side_reach(a, &s, lo) < 0 || side_reach(a, &s, hi) < 0) {
        return -ENOMEM;
    }
    bit_init(&it, other, positive, h->zero_threshold, h->schema);
    while (bit_next(&it)) {
        s.v[it.idx - s.off] += sign * it.count;
    }
    side_put(h, positive, &s);
    return 0;
}

/* Prometheus zeroCountForLargerThreshold: the zero count h would have with
 * a zero bucket widened to |larger| (which grows further while it cuts a
 * non-empty bucket in two); *thr gets the threshold reached. */
static double zero_count_for(const struct pm_hist *h, double larger, double *thr)
{
    if (larger == h->zero_threshold) {
        *thr = larger;
        return h->zero_count;
    }
    for (unsigned round = 0;; round++) {
        double count = h->zero_count;
        struct bit it;
        bit_init(&it, h, true, 0, h->schema);
        while (bit_next(&it)) {
            double lo = get_bound(it.idx - 1, h->schema), up = get_bound(it.idx, h->schema);
            if (lo >= larger) {
                break;
            }
            count += it.count;
            if (up > larger) {
                if (it.count != 0) {
                    larger = up;
                }
                break;
            }
        }
        bool again = false;
        bit_init(&it, h, false, 0, h->schema);
        while (bit_next(&it)) {
            double lo = -get_bound(it.idx, h->schema), up = -get_bound(it.idx - 1, h->schema);
            if (up <= -larger) {
                break;
            }
            count += it.count;
            if (lo < -larger) {
                if (it.count != 0) {
                    larger = -lo;
                    again = true;
                }
                break;
            }
        }
        /* each round widens the threshold past one more bucket: bounded by
         * the number of buckets */
        if (!again || round > h->n_pos + h->n_neg + 2) {
            *thr = larger;
            return count;
        }
    }
}

/* Zeroes the buckets now inside h's zero bucket (trimBucketsInZeroBucket);
 * h's arrays are h's own. */
static void trim_in_zero(struct pm_hist *h)
{
    for (uint32_t i = 0; i < h->n_pos; i++) {
        if (get_bound(h->pos_offset + (int32_t)i - 1, h->schema) >= h->zero_threshold) {
            break;
        }
        h->pos[i] = 0;
    }
    for (uint32_t i = 0; i < h->n_neg; i++) {
        if (-get_bound(h->neg_offset + (int32_t)i - 1, h->schema) <= -h->zero_threshold) {
            break;
        }
        h->neg[i] = 0;
    }
    struct side s;
    side_get(h, true, &s);
    side_trim(&s);
    side_put(h, true, &s);
    side_get(h, false, &s);
    side_trim(&s);
    side_put(h, false, &s);
}

/* reconcileZeroBuckets: widens whichever zero bucket is narrower until
 * both match; returns other's zero count at that threshold. */
static double reconcile_zero(struct pm_hist *h, const struct pm_hist *other)
{
    double ozc = other->zero_count, othr = other->zero_threshold;
    for (unsigned round = 0; othr != h->zero_threshold && round < 64; round++) {
        if (h->zero_threshold > othr) {
            ozc = zero_count_for(other, h->zero_threshold, &othr);
        }
        if (othr > h->zero_threshold) {
            double thr;
            h->zero_count = zero_count_for(h, othr, &thr);
            h->zero_threshold = thr;
            trim_in_zero(h);
        }
    }
    return ozc;
}

/* A copy of |h| at schema ts <= h->schema (CopyToSchema), own arrays. */
static struct pm_hist *copy_to_schema(arena *a, const struct pm_hist *h, int32_t ts)
{
    if (ts == h->schema) {
        return pm_hist_dup(a, h);
    }
    struct pm_hist *c = (struct pm_hist *)arena_alloc(a, sizeof *c);
    if (c == NULL) {
        return NULL;
    }
    memset(c, 0, sizeof *c);
    c->schema = ts;
    c->zero_threshold = h->zero_threshold;
    c->zero_count = h->zero_count;
    c->count = h->count;
    c->sum = h->sum;
    for (int side = 0; side < 2; side++) {
        struct side s = {0}, from;
        side_get(h, side == 0, &from);
        if (from.n != 0 &&
            (side_reach(a, &s, target_idx(from.off, h->schema, ts)) < 0 ||
             side_reach(a, &s, target_idx(from.off + (int32_t)from.n - 1, h->schema, ts)) < 0)) {
            return NULL;
        }
        struct bit it;
        bit_init(&it, h, side == 0, 0, ts);
        while (bit_next(&it)) {
            s.v[it.idx - s.off] += it.count;
        }
        side_trim(&s);
        side_put(c, side == 0, &s);
    }
    return c;
}

/* h (own arrays) += sign * other, other->schema >= h->schema. */
static int add_into(arena *a, struct pm_hist *h, const struct pm_hist *other, double sign)
{
    double ozc = reconcile_zero(h, other);
    if (sign > 0) {
        h->zero_count += ozc;
        h->count += other->count;
        h->sum += other->sum;
    } else {
        h->zero_count -= ozc;
        h->count -= other->count;
        h->sum -= other->sum;
    }
    if (merge_side(a, h, other, true, sign) < 0 || merge_side(a, h, other, false, sign) < 0) {
        return -ENOMEM;
    }
    return 0;
}

static void compact(struct pm_hist *h)
{
    struct side s;
    side_get(h, true, &s);
    side_trim(&s);
    side_put(h, true, &s);
    side_get(h, false, &s);
    side_trim(&s);
    side_put(h, false, &s);
}

struct pm_hist *pm_hist_add(arena *a, const struct pm_hist *x, const struct pm_hist *y)
{
    /* the receiver is the one with the smaller schema, as the engine's
     * vectorElemBinop and sum aggregation choose it */
    const struct pm_hist *recv = y->schema >= x->schema ? x : y;
    const struct pm_hist *other = recv == x ? y : x;
    struct pm_hist *h = pm_hist_dup(a, recv);
    if (h == NULL || add_into(a, h, other, 1) < 0) {
        return NULL;
    }
    compact(h);
    return h;
}

struct pm_hist *pm_hist_sub(arena *a, const struct pm_hist *x, const struct pm_hist *y)
{
    return pm_hist_sub_at(a, x, y, x->schema < y->schema ? x->schema : y->schema);
}

struct pm_hist *pm_hist_sub_at(arena *a, const struct pm_hist *x, const struct pm_hist *y,
                               int32_t ts)
{
    if (ts > x->schema || ts > y->schema) {
        return NULL;
    }
    struct pm_hist *h = copy_to_schema(a, x, ts);
    if (h == NULL || add_into(a, h, y, -1) < 0) {
        return NULL;
    }
    compact(h);
    return h;
}

struct pm_hist *pm_hist_scale(arena *a, const struct pm_hist *x, double f)
{
    struct pm_hist *h = pm_hist_dup(a, x);
    if (h == NULL) {
        return NULL;
    }
    h->zero_count *= f;
    h->count *= f;
    h->sum *= f;
    for (uint32_t i = 0; i < h->n_pos; i++) {
        h->pos[i] *= f;
    }
    for (uint32_t i = 0; i < h->n_neg; i++) {
        h->neg[i] *= f;
    }
    return h;
}

/* detectReset over one side: prev walked at curr's schema and threshold
 * against curr walked the same way. */
static bool side_reset(const struct pm_hist *prev, const struct pm_hist *curr, bool positive)
{
    struct bit pi, ci;
    bit_init(&pi, prev, positive, curr->zero_threshold, curr->schema);
    bit_init(&ci, curr, positive, curr->zero_threshold, curr->schema);
    bool have_c = bit_next(&ci);
    while (bit_next(&pi)) {
        while (have_c && ci.idx < pi.idx) {
            have_c = bit_next(&ci);
        }
        if (!have_c || ci.idx > pi.idx) {
            if (pi.count != 0) {
                return true;
            }
        } else if (ci.count < pi.count) {
            return true;
        }
    }
    return false;
}

bool pm_hist_is_reset(const struct pm_hist *x, const struct pm_hist *y)
{
    /* y.DetectReset(x): y is the newer sample */
    if (y->count < x->count || y->schema > x->schema || y->zero_threshold < x->zero_threshold) {
        return true;
    }
    double thr;
    double xzc = zero_count_for(x, y->zero_threshold, &thr);
    if (thr != y->zero_threshold || y->zero_count < xzc) {
        return true;
    }
    return side_reset(x, y, true) || side_reset(x, y, false);
}

/* ---- quantile and fraction: every non-empty bucket in value order ---- */

struct abit {
    const struct pm_hist *h;
    int state; /* 0 negative (from the highest index down), 1 zero, 2 positive, 3 done */
    uint32_t i;
    double lower, upper, count;
};

static bool has_nonzero(const double *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] != 0) {
            return true;
        }
    }
    return false;
}

static bool abit_next(struct abit *it)
{
    const struct pm_hist *h = it->h;
    for (;;) {
        switch (it->state) {
        case 0:
            while (it->i < h->n_neg) {
                uint32_t k = h->n_neg - 1 - it->i++;
                if (h->neg[k] == 0) {
                    continue;
                }
                int32_t idx = h->neg_offset + (int32_t)k;
                it->lower = -get_bound(idx, h->schema);
                it->upper = -get_bound(idx - 1, h->schema);
                if (it->upper > -h->zero_threshold) {
                    it->upper = -h->zero_threshold;
                }
                it->count = h->neg[k];
                return true;
            }
            it->state = 1;
            break;
        case 1:
            it->state = 2;
            it->i = 0;
            if (h->zero_count > 0) {
                it->lower = -h->zero_threshold;
                it->upper = h->zero_threshold;
                it->count = h->zero_count;
                return true;
            }
            break;
        case 2:
            while (it->i < h->n_pos) {
                uint32_t k = it->i++;
                if (h->pos[k] == 0) {
                    continue;
                }
                int32_t idx = h->pos_offset + (int32_t)k;
                it->lower = get_bound(idx - 1, h->schema);
                it->upper = get_bound(idx, h->schema);
                if (it->lower < h->zero_threshold) {
                    it->lower = h->zero_threshold;
                }
                it->count = h->pos[k];
                return true;
            }
            it->state = 3;
            return false;
        default:
            return false;
        }
    }
}

/* The zero bucket's bounds narrowed to 0 on the side with no buckets. */
static void zero_side_fix(const struct pm_hist *h, double *lower, double *upper)
{
    if (*lower < 0 && *upper > 0) {
        bool neg = has_nonzero(h->neg, h->n_neg), pos = has_nonzero(h->pos, h->n_pos);
        if (!neg && pos) {
            *lower = 0;
        } else if (!pos && neg) {
            *upper = 0;
        }
    }
}

double pm_hist_quantile(double q, const struct pm_hist *h)
{
    if (q < 0) {
        return -INFINITY;
    }
    if (q > 1) {
        return INFINITY;
    }
    if (h->count == 0 || isnan(q)) {
        return NAN;
    }
    struct abit it = {.h = h};
    double rank = q * h->count, count = 0;
    double lower = 0, upper = 0, bcount = 0;
    while (abit_next(&it)) {
        lower = it.lower;
        upper = it.upper;
        bcount = it.count;
        count += bcount;
        if (count >= rank) {
            break;
        }
    }
    zero_side_fix(h, &lower, &upper);
    if (count > h->count) {
        count = h->count;
    }
    if (count < rank) {
        return upper;
    }
    rank -= count - bcount;
    return lower + (upper - lower) * (rank / bcount);
}

double pm_hist_fraction(double lower, double upper, const struct pm_hist *h)
{
    if (h->count == 0 || isnan(lower) || isnan(upper)) {
        return NAN;
    }
    if (lower >= upper) {
        return 0;
    }
    double rank = 0, lower_rank = 0, upper_rank = 0;
    bool lower_set = false, upper_set = false;
    struct abit it = {.h = h};
    while (abit_next(&it)) {
        double bl = it.lower, bu = it.upper, bc = it.count;
        zero_side_fix(h, &bl, &bu);
        if (!lower_set && bl >= lower) {
            lower_rank = rank;
            lower_set = true;
        }
        if (!upper_set && bl >= upper) {
            upper_rank = rank;
            upper_set = true;
        }
        if (lower_set && upper_set) {
            break;
        }
        if (!lower_set && bl < lower && bu > lower) {
            lower_rank = rank + bc * (lower - bl) / (bu - bl);
            lower_set = true;
        }
        if (!upper_set && bl < upper && bu > upper) {
            upper_rank = rank + bc * (upper - bl) / (bu - bl);
            upper_set = true;
        }
        if (lower_set && upper_set) {
            break;
        }
        rank += bc;
    }
    if (!lower_set || lower_rank > h->count) {
        lower_rank = h->count;
    }
    if (!upper_set || upper_rank > h->count) {
        upper_rank = h->count;
    }
    return (upper_rank - lower_rank) / h->count;
}
