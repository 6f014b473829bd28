package merger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/writeout/writeout/columns"
	"github.com/writeout/writeout/merger/internal/fixture"
)

// goldenOutputs are the SHA-256 digests of the outputs that commit 8008307 wrote for the
// seeded cases of TestGoldenBytes (zstd-derived: that 90c22e1 wrote, format version 6): a
// refactoring of the merge, the rollup, the phases or the Builder must write the same bytes. WRITEOUT_GOLDEN_PRINT=1 prints the table the tree writes.
var goldenOutputs = map[string]string{
	"01/plain":         "571d20117b5c7845f4c36b3438adf0e343187283588a4e9f1e617c6b8bce31d1",
	"01/rollup-hour":   "362af284cb291d0c54ea7c70acfee049cfe7009d78ed278a9df29e4de504899c",
	"01/rollup-phases": "242b3386d81febf9faa7b3ec81ca5a2bc42cf65d0575424ab1e0d4cbb4230ae4",
	"01/zstd":          "89e0c7d3b280922e33d7aba491d5611d5fbea0bae1dac5e000e71726b49cd63c",
	"01/zstd-derived":  "a677789a12505cca9c469a2592cd14bcff118d79ea093b09da9d4713ac5e311f",
	"01/builder":       "1099d89b626c2f2e44b05c1e4b0119416548a8d0984b8622d2e400384067b96d",
	"02/plain":         "d3fd3abfe0b3d1a5c7c5af3cfcba71c18e55f3194926cd2f120128d6e28633b8",
	"02/rollup-hour":   "f42aded0fca9f4094a7a623a8978d339e30eb048e2938cc51cf374cded9c30b4",
	"02/rollup-phases": "7cb290d622d44e271435bb95785e9370d6fbd8c884d25f880120a06dc5ccbed8",
	"02/zstd":          "d71970f47591d5dcd5d269d821f76d86252c252337f40b83568dd1211bf456db",
	"02/zstd-derived":  "b62c06f5ee1237311600e08546b19609ad304f081c3411749a33143a0f848d1a",
	"02/builder":       "5667a46a1e1f96311497b8d52c693cce788d14695f45c67c012eda09bb6f37b2",
	"03/plain":         "69b40c68b9f839dd6dc5f091e8daca24a0d6e9426b961c5b1848c1fe78b1996d",
	"03/rollup-hour":   "f1d321892bab7f8083a03406ab7ce8aecad69c7a183e74b1e3e29070adee0ce7",
	"03/rollup-phases": "df2f589859cf4524198db7b541c9c47738f49a14e5a2f44fcfa3a7b2a97913a3",
	"03/zstd":          "93dbca05d2d459a64ba99baf98210f1eb1cb9abaf8e733cb0f5b8275b7a21332",
	"03/zstd-derived":  "f1ebc3a823b0c8d875baa5dcd837921b1cb5a4651099618ad21247c458a041a1",
	"03/builder":       "5912d949ada789d4e44b19a6dc2c6396587c8d7e522724bf6664a48238c18824",
	"04/plain":         "0a6b040fefc2987c9ebdc6ef5247d3f67a3b1d1e4faf5e44eb699a8accaae5f3",
	"04/rollup-hour":   "f53e7d2ec51d71cf48b34d1adbe6b2d6e1132d1402238aea857ffeaa7ebc9f1e",
	"04/rollup-phases": "a897f64686db5865043b0a5f37611aca665889cb814e0da41cb499bbe133a3f7",
	"04/zstd":          "9c0b5cc07fc159b861aaff21dd83ce8c3d93e8da908bb6ea92d43ca3d6b3e9f7",
	"04/zstd-derived":  "19db0eb16f1cb54907a0da5450fe65dfe61d1d22ae53a43da5e813928f9d5e56",
	"04/builder":       "7f92a903d76e41661a6e6785489ffdb509825a2edad37844a75076f49faefe23",
	"05/plain":         "eb27c41011335ce0fc650a1243ebfac8c21a2256574eebb12f105689f18312ce",
	"05/rollup-hour":   "0b9c5db31f70d5d6f68f159dc2381d6dd5f56d8711385c634930e2dfb79f823f",
	"05/rollup-phases": "194113740ecf8465d89f6486bc9fba6e055852e463ad25da3d41dde7d0d697fd",
	"05/zstd":          "85a5cf4afc29cbbd4ad5248acdfee33172d1294baf76cbe1be0213d7a4873827",
	"05/zstd-derived":  "fa8d40823f0e997d69924ce8a1739d56d001c5a5b89a38136b1eb94c6a1bda90",
	"05/builder":       "2680c496e08704d56cea7036e51c675f8e9e7214ae6b9d8885c59684808d2406",
	"06/plain":         "4be12a9c8a32078dfefd138d677457a1a2f18fa009800a3126695b8437decd6b",
	"06/rollup-hour":   "78aed57cd87abf39f8a8695a0396114d720a516765d639bcee2342767c8a45d0",
	"06/rollup-phases": "1400a968f862db1da633f83fd10d5bfeb3bfbf821bb5ee243b37d62d507f945d",
	"06/zstd":          "ea369a7f196a21e3bacebdf5df316fa5de01ffe7ba6c650b3ea06b20a7b6b56b",
	"06/zstd-derived":  "7880f8d4200d2ebb3f7157523d8cd87a2a915d8dd85086e320bf9e2bcebb89ba",
	"06/builder":       "cf91ec6039e1a033d88c6b1ed06e43882521f9922dd9bbab4341c3f07372c966",
	"07/plain":         "a2785c9ed20922fa5827acf9c4221609152af84948563534a6dc72d75bbcd3ed",
	"07/rollup-hour":   "d1751b16bd28b2fdc46077ee3855b9a66ad69362068b68090dde4615b100980b",
	"07/rollup-phases": "b867d1a0ae62c82ca74a0844e5c5c5fc3bbbedff3975724a695662a7456dc78e",
	"07/zstd":          "2146ac0ba01454c529bbfa9ead02ce9546d65dd5f081774853f1b92c2a20b4c0",
	"07/zstd-derived":  "b56a1c90577bcac36c092799921e4273aeb66e3746cbd39ae93b5e95f888cc12",
	"07/builder":       "cb7dd4f29f54cadf5c79c47cdbf8b9d4891b0e3b29ffa073de12daf99c1bf09c",
	"08/plain":         "38033a462403ab6bc3459d718468f91e69a389279be77f45badc30dd2687b3a5",
	"08/rollup-hour":   "5ccb13a1de45dd03471e5996816b7f3ff0c38d9c9454304533c607324dadfc04",
	"08/rollup-phases": "f0eba6e3bd8ea3711cb1d3b6bd986c82ae361ea39eff1c68ef3a2f26f08048d1",
	"08/zstd":          "691af037426d16e306f2345963744cdbe55de677b40f5a49dfea93f5c40a3aeb",
	"08/zstd-derived":  "68aeef80af1a9a9a7bd7c3b1639d47222b87a10c9c2ae5a7889813a944989665",
	"08/builder":       "d55198a15d6e4c83b2ba18f151990e667e9ca5a92baf3aa4a618bccc8b5e4df4",
	"09/plain":         "10235dbd68ccabc3bd972578e0034d745f3afd079800fdfd455df445a3024251",
	"09/rollup-hour":   "6e5fa049d82ac6be5285f94c442e51abc5d7e2b2a179745cf3a5af214ddbf4bb",
	"09/rollup-phases": "7c1bfa06228645e4324bcdc52c912f982064944561a104f6ac19870b2873d240",
	"09/zstd":          "9b83f131603060a02f4cfbe18cae8c4d95766c2589073fc750c5f87e79d7cb5e",
	"09/zstd-derived":  "41f283821ba6a3396574fbefd52446ae70c20dfdf43d58b041a93710d41d5bb6",
	"09/builder":       "d4012f1bf7a85b977b0e1ab537427289073e7e2df5f1d7b024d3f64575793c09",
	"10/plain":         "f5f19bf9aded859eb9bc619a0627b4ade3af98c28e0232a31989e3f59df933db",
	"10/rollup-hour":   "3c7d938405bf8f40968f51083478447a52f27fd40bfa083f23a8c8b004b96536",
	"10/rollup-phases": "4ac1a77bb16297374a3f1f27c00281c9fd782edf94a51377e486afb4969357a0",
	"10/zstd":          "a39423fd5251ddf499ead7fdde9276b202869864510bd77fac0d771f344659fa",
	"10/zstd-derived":  "e5bc2103ffe1d05d5c0b2262f220a3b16b9e038289671abec0d5afdc6cc5ac61",
	"10/builder":       "30be8434195e73afc092299b79dc82935eeee9eb15d26edf9940c9af78288310",
	"11/plain":         "160a492a8be051ef4d5f82a86f08d8d6e7ff0b1eb750785f34c4e9b71f8f80a8",
	"11/rollup-hour":   "cb1480d7f6264cee21c646e8a93519e3799c77d7065d193d6f3df3c2cf29f3d0",
	"11/rollup-phases": "f13d17a184f4b182f5613c74a2ddfdbcd91f4a63766e6f7249235f4fe7c1d879",
	"11/zstd":          "021bce4337d6374fd1c231bb15ff8a666ca10eceba26aaf0a09b5e886f196ecf",
	"11/zstd-derived":  "80c946d396b6c38eed8170148ac5e758b0a1f39ec6a4c093a754f381b9afddbd",
	"11/builder":       "fa87d9c5c53ed7bbe2c48655e397ccfb435f576b6df7c0a0fe2c04b4453abcaf",
	"12/plain":         "33d0f49d9ff9629f1d162a7bafd068d714f93071ebe0fc316e49b0569c8a50b7",
	"12/rollup-hour":   "bbb9f76f705984887c67cb3b7499455ddb15d8780dbcc935c3465c0a09e87b4f",
	"12/rollup-phases": "564ba6029ce25b1d60d16a6a6437af03b12efb059c82969f84f55a2eac5ce010",
	"12/zstd":          "880372a09ba4bd4f1ae75773c6228b6bcd8fa6ebac06707cc2072d95b7066d2b",
	"12/zstd-derived":  "9f5160146249898bf7f0e28b327794831d48b0c9e97b650a199bfc27f6144a25",
	"12/builder":       "e45290bd9dd8729d7d3d1bf0eeca2150924027f4c65f424c85e6ceae9c0837db",
	"13/plain":         "af261d9f274888f2ad9e17a714797f5c592e2d5153a1e4c83a79c1ab1cfa17f9",
	"13/rollup-hour":   "9f32c25baf4900098bdb1c0b6cbcbed5b7003646f66cdb352d74f96180be7c61",
	"13/rollup-phases": "cfeaaac1550391f236ff32dcd7dbfab53243e3b20862e6b771a173920fe58ebd",
	"13/zstd":          "66503dcaf888a540cd85884d10911177c20b70874b399b4acfe0c98a63a5dde5",
	"13/zstd-derived":  "30570f5ffb516c7090a11aa1af0e865eaa3fdc76dd4d3c492c718689959a52e9",
	"13/builder":       "772c092e6db0e397e401396c746b2f3c710e2575a98375576b48bc531591854e",
	"14/plain":         "9781675a13b9919e7b1cc52747445ce7afcdb468c3cebb59d7ec7f1069f8b9bf",
	"14/rollup-hour":   "70d083e1462b0645d1bbceb3d786c356ea14d6f656de5bf8220e13293564eff6",
	"14/rollup-phases": "447078a004552f70161cfdfdbe1f800daf337e3e4a1f8d457f388d7ed0259124",
	"14/zstd":          "a7ece8a5e3b4a9ddbff23528aaee058d237594157f08d45056179d7806dd8586",
	"14/zstd-derived":  "1bf8b484f7b89a5c86ea5b29593c95c9dfff9f2fce0be31fcbedb12468121dc9",
	"14/builder":       "c926838f9e4269cadd7eaf9d10af520dc36e0c6245e297431c264ca5c33b221f",
	"15/plain":         "2dbe3b696f70aa4ebc9ff11eb82f63793ac21bd26a73a280b8d8211b28cfede3",
	"15/rollup-hour":   "a35c9d19ed2564e551749e738fdba940294015e2ca652b908970ee87fd2fc2da",
	"15/rollup-phases": "a33934fde4dca9841483d32d076849ce5c8c74475e3cc1bc6c664cacffa6227f",
	"15/zstd":          "9e7951428a98b698b9252e509edb5999c496a925e19bfcee3759c594d4d685ba",
	"15/zstd-derived":  "2d27a415fe39a02580d78cd3b6118e9cc84a5e399a145ed84efd7a9066ae2aa9",
	"15/builder":       "e33ad4cc99a93966aa3f32da50b811861d566099e928a94cfcc80a81e3524758",
	"16/plain":         "3e024ebf96c7827a60f1fbf8b8d8d7a0d44084a2db31ed8640976e83d5b183e7",
	"16/rollup-hour":   "33c8cc06781a9875e6b9aabe5890f9b9fa82665de6fefd8c02122d4c4a8067e0",
	"16/rollup-phases": "120bdbb725517e32816cf43b936ce9cc1bbf2ea95bd53ad267ca3f16c885d073",
	"16/zstd":          "3e024ebf96c7827a60f1fbf8b8d8d7a0d44084a2db31ed8640976e83d5b183e7",
	"16/zstd-derived":  "3e024ebf96c7827a60f1fbf8b8d8d7a0d44084a2db31ed8640976e83d5b183e7",
	"16/builder":       "7111fcdc03faa76640ddb9f1351abc5490284386ee1bc284a15646e540d7ed5e",
	"17/plain":         "b541488ad798a6770d2f38f88082a9781c12c543c70efffbcdcd495657e2c291",
	"17/rollup-hour":   "ea7c1b81d738804bc84e4488cdb1da2cfd1458debe7a739b4d541ddee0bf9454",
	"17/rollup-phases": "8ca1771e636a2da75634ef19c6d8b1b2411b65342f24d5b1d59b50fda293d879",
	"17/zstd":          "cdc540e3a88f1e5c8502fd5c444b2489280073b29bc8a271a8b624b0fc8f705e",
	"17/zstd-derived":  "eb7269c1b8d35137348814222c2e62b9955b1ac6ecbbce4197721c3d758bd4c4",
	"17/builder":       "54a9fdf0d65e497d956897d1467aca9ffa4aad62e531d81990e72d43140e93f7",
	"18/plain":         "bf94ce67ad391ccacdb0f5b612d1f7928e9f5b9f42251565791104f2623fd252",
	"18/rollup-hour":   "2860e21e9ab9c8cc0a4ee4615919adecb757f06acc138a32c55d47c034c5b11a",
	"18/rollup-phases": "429864d3bcbbcbb0a5992ad9927d6535166bdf05d3fb8e01d153500cfe405a87",
	"18/zstd":          "b74c15bcb8a4bd0994e8b35a45b47e6e0fb4095975bdaacae30329b743cdddb1",
	"18/zstd-derived":  "00e6b410afe1b612e4a40fbed6a7dce48febb34a627c4c1a8954c0eb896afaf7", // id-chunks-v5 from 332a4c1
	"18/builder":       "d5fc0666526e7fc72c93776f8da32e88b730e1557dd1d28b6f5272590f85274e",
	"19/plain":         "98571dbb67b2f583ae57746d03e770151c280ef3d0dc36a27b4fa0cdfb12b97c",
	"19/rollup-hour":   "99241f29253176031db2f2cd95911f5531aed9f2875ab1c5a0ead4ebab829446",
	"19/rollup-phases": "5e46a8d7ad6652fd51d241688598e776b068cc1f85d2b2efe39fce4e03c9a310",
	"19/zstd":          "170d47fb2d42d4a0b9256feb50772feb1daf148590aa40a48380853f670649a9",
	"19/zstd-derived":  "0b0511407b789cf8b244d2c3e3841a4480eca25e5ff67094737a59db304a4e3c",
	"19/builder":       "315deecf81ef29065853559edf4e0dd796c8c0aa9defd0bff432221a0416f215",
	"20/plain":         "7f0cbda0844d964b0f41f8da3fa61a75197ab3d92f192e8965367c4aef816e72",
	"20/rollup-hour":   "8e335f1f8f7aff0ce1a3826b672870e90a729c0dbaaa87099263b5998ef2ab43",
	"20/rollup-phases": "c783d4a1e6e3da46e3df5fb81db16105e22629908f98a4b77bde590fba395187",
	"20/zstd":          "e89251cea54d32b833b0b69d220d336911ae5d3ad97535955aba614b49e3d05d",
	"20/zstd-derived":  "54473aa83f88a812cde571260eaa2554ada1e41eee3c6d35cd915d7351cc289a",
	"20/builder":       "4b209de3ec258f4d8ae545571124a2f53c71ca8f4b7d7195bb361a422ba0ac07",
	"21/plain":         "e6452b5d3b9dd1487c3a6bd0f84fa22ff4c1a1e189e675ffa0aa0588567c070f",
	"21/rollup-hour":   "72ed4f8a0117441169bba9355b994a9dbcd4a5b6c3af7b2325cb4e3a9d5f9af7",
	"21/rollup-phases": "cfad36c78b2b218548dd1874a64766f6103ec1faa6ce03aba63ea51fdbe90e20",
	"21/zstd":          "380910860dae5692f337c3295162d4e90808f15347f841d7042a889eb5842ae0",
	"21/zstd-derived":  "9f753560913e8feb1dfaf762896bd2ab878715afb0b38a7e3337309145aa0696",
	"21/builder":       "0d6ec51ee6c931ff87e311d54eff80d456efc4637680df2dcc5c874472ca7cd5",
	"22/plain":         "c1186f22ba226e53d8ad3089c8463721fb73f658727080f2e0b14037ff83dc66",
	"22/rollup-hour":   "11fdcdee5da4961a017c10d8ee24b209755e72485bca0468b3e33c2ea0541b0f",
	"22/rollup-phases": "48620023d256186e63786a25230268b121e12c85857704324e839fa54d2513ac",
	"22/zstd":          "ce0f0465b6af2a1d7e9be024c005f0562767ea7ef85852921c507d6063efce7a",
	"22/zstd-derived":  "d0763c67c59b3cb780f7cb1ec83af03f3cea19ddf85fa9970bdfe96a2ef79529",
	"22/builder":       "ad9803dcc8c645f12259f94f2be0a3b5d103831a6369431a6462744b3485cc82",
	"23/plain":         "9303be34eecd1242ee17bac7f7396a98b3342f3bb1e28278db4d26efcd8e9032",
	"23/rollup-hour":   "c97daacc13b63735aef0b185018ad41529a1dd0aeb723c72e865a839a55962b6",
	"23/rollup-phases": "07ba22745e8e2db84e16e735e0911e920c0c4cfad4429c24b976fddd7af6e320",
	"23/zstd":          "2826f001458be84d446359a4ebb01ee93fabe033c07ae87dd545e02e57a1cce6",
	"23/zstd-derived":  "2f201fbf70e1a780b4b23bdce47f0c96a509ee7858e65670ab880a89c130e0f4",
	"23/builder":       "5afe58b65f4e80f4098ea2dcc60e5b03f467728bc7b5572a9d9eed62701463a2",
	"24/plain":         "9c7a5a9f08ecc8887c1f9fb8c38dcf0c7183f3ef587f8e7c264a12e18413f2e0",
	"24/rollup-hour":   "1f516808eea38f74ec803db5ee72eb5f9ed60e96b305505bd367661d2854d1eb",
	"24/rollup-phases": "8a45184a33efbdffd9bbbafdf84bc124f70a19990ce9674894d992fce7b2a733",
	"24/zstd":          "03758438ef1b3a829908e9e7ff2bb5cdc465de024aa7ec029c73484e63790f4c",
	"24/zstd-derived":  "b7728f4feb227d6921371dddae1bc6d1219df406029ce52d82830e34c0f169ab",
	"24/builder":       "fbd5ba4fa73ff5a2c8ad9d2dc4551af017f6d083288d53607410a36a8c5597fe",
}

// TestGoldenBytes merges seeded random cases (plain, hour rollup, rollup in phases of two
// inputs, with zstd) and persists seeded builder cases, and requires every output to hold the
// bytes 8008307 wrote.
func TestGoldenBytes(t *testing.T) {
	got := goldenDigests(t)
	if os.Getenv("WRITEOUT_GOLDEN_PRINT") != "" {
		for seed := 1; seed <= 24; seed++ {
			for _, v := range []string{"plain", "rollup-hour", "rollup-phases", "zstd", "zstd-derived", "builder"} {
				k := fmt.Sprintf("%02d/%s", seed, v)
				fmt.Printf("\t%q: %q,\n", k, got[k])
			}
		}
		return
	}
	require.Equal(t, goldenOutputs, got)
}

// TestGoldenBytesBoundedLogs is TestGoldenBytes with the id logs' bounds a few rows: every
// log past 7 ids writes runs of 5 rows to the medium (a tmpfile one: a real file), and the
// bitmaps are written 11 rows at a time. The bytes are the same.
func TestGoldenBytesBoundedLogs(t *testing.T) {
	defer func(m, r, s int) { logMemIDs, logRunIDs, logSortRows = m, r, s }(logMemIDs, logRunIDs, logSortRows)
	logMemIDs, logRunIDs, logSortRows = 7, 5, 11
	require.Equal(t, goldenOutputs, goldenDigests(t))
}

// goldenDigests returns the SHA-256 of TestGoldenBytes' outputs.
func goldenDigests(t *testing.T) map[string]string {
	got := map[string]string{}
	sum := func(path string) string {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:])
	}
	for seed := uint64(1); seed <= 24; seed++ {
		rng := rand.New(rand.NewPCG(seed, 33))
		dir := t.TempDir()
		rc := fixture.NewCase(rng, 1+rng.IntN(4), 1+rng.IntN(400))
		var inputs []*columns.Segment
		for i := range rc.Schemas {
			inputs = append(inputs, fixture.WriteSegment(t, dir, fmt.Sprintf("in%d.seg", i), rc.Schemas[i], rc.Rows[i]))
		}
		variants := []struct {
			name string
			opts Options
		}{
			{"plain", Options{}},
			{"rollup-hour", Options{Rollup: true, Granularity: columns.GranularityHour}},
			{"rollup-phases", Options{Rollup: true, Granularity: columns.GranularityMinute, MaxFanIn: 2}},
			{"zstd", Options{Compression: columns.CompressionZstd, ChunkRows: 64, StoreIDs: true}},
			{"zstd-derived", Options{Compression: columns.CompressionZstd, ChunkRows: 64}},
		}
		for _, v := range variants {
			dst := filepath.Join(dir, v.name+".seg")
			mustMerge(t, inputs, dst, v.opts)
			got[fmt.Sprintf("%02d/%s", seed, v.name)] = sum(dst)
		}

		schema, rows := fixture.NewBuilderCase(rng, 1+rng.IntN(400))
		b, err := NewBuilder(schema, BuilderOptions{})
		require.NoError(t, err)
		for _, r := range rows {
			require.NoError(t, b.Add(r))
		}
		dst := filepath.Join(dir, "builder.seg")
		_, err = b.Persist(context.Background(), dst, PersistOptions{})
		require.NoError(t, err)
		require.NoError(t, b.Close())
		got[fmt.Sprintf("%02d/builder", seed)] = sum(dst)
	}
	return got
}
